// Symbol.asyncDispose came with Node.js 18.18 (and 20.4). On older runtimes define it the way Node.js itself does,
// as Symbol.for("nodejs.asyncDispose"), so `[Symbol.asyncDispose]` methods get a real key on every Node.js 18 and
// TypeScript's downlevelled `await using` (which looks up Symbol.asyncDispose at run time) finds them.
// Every module that defines such a method imports this file first, so it runs before their classes are defined.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol.for("nodejs.asyncDispose");

export {};
