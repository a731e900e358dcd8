// Runtime checks that need nothing newer than Node.js 18.0 (no node:test hooks, no module.register), so that
// clients/node/test.sh can run them on every runtime it tests, the oldest Node.js 18 included, against a real ruvio:
// - the product post's two snippets, verbatim (test/snippets/), through the recording wrapper;
// - the README's examples (examples/*.mjs);
// - disposal: Symbol.asyncDispose on the client and on a lock handle, in ES modules and in CommonJS;
// - `await using` as TypeScript compiles it for an ES2022 target (how code on Node.js 18 and 20 uses it), and the
//   native `await using` syntax where the runtime has it.
//
//   node test/compat.mjs                                        (Node.js 18.19 or later: registers the hook itself)
//   node --experimental-loader ./test/snippets/hooks.mjs test/compat.mjs     (older runtimes: test.sh does this)
//
// Prints one line per check and a closing "compat: N passed, N failed"; exits 1 when any check failed.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as nodeModule from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startRuvio } from "./helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const hooksUrl = new URL("./snippets/hooks.mjs", import.meta.url).href;

if (typeof nodeModule.register === "function") {
  nodeModule.register(hooksUrl);
} else if (!process.execArgv.some((a) => a.includes("snippets/hooks.mjs"))) {
  console.error(`compat: Node.js ${process.version} has no module.register: run with --experimental-loader ./test/snippets/hooks.mjs`);
  process.exit(2);
}

// The client, loaded as a user loads it (the package's own name, through its exports map).
const { createClient, LockHandle } = await import("ruvio-client");
const requireFromHere = nodeModule.createRequire(import.meta.url);

const results = [];
async function check(name, fn) {
  try {
    await fn();
    results.push(true);
    console.log(`ok - ${name}`);
  } catch (e) {
    results.push(false);
    console.log(`not ok - ${name}\n${String(e?.stack ?? e).replace(/^/gm, "    ")}`);
  }
}

const server = await startRuvio();
const admin = createClient({ port: server.port });
const key = (k) => `compat:${process.pid}:${k}`;
let run = 0;

async function runSnippet(name) {
  const h = { port: server.port, options: [], clients: [], calls: [] };
  globalThis.__ruvioSnippetHarness = h;
  try {
    await import(new URL(`./snippets/${name}.mjs?compat=${++run}`, import.meta.url).href);
  } finally {
    await Promise.all(h.clients.map((c) => c.close()));
    delete globalThis.__ruvioSnippetHarness;
  }
  assert.deepEqual(h.options, [{ host: "127.0.0.1", port: 6379 }], "the snippet creates its client as the post shows");
  return h.calls;
}

try {
  console.log(`compat: Node.js ${process.version} (${process.execPath})`);

  await check("the snippets are verbatim copies that import ruvio-client", () => {
    for (const name of ["lease", "semaphore"]) {
      assert.match(readFileSync(path.join(here, "snippets", `${name}.mjs`), "utf8"), /^import \{ createClient \} from 'ruvio-client';\n/);
    }
  });

  await check("lease snippet: token -> you hold it, release -> true", async () => {
    const calls = await runSnippet("lease");
    assert.equal(calls.length, 2);
    assert.equal(calls[0].method, "lease");
    assert.match(calls[0].result, /^[1-9][0-9]*$/);
    assert.deepEqual(calls[1], { method: "release", args: ["job:nightly-report", calls[0].result], result: true });
    assert.equal(await admin.lockInfo("job:nightly-report"), null);
  });

  await check("lease snippet: null -> someone else holds it", async () => {
    const other = await admin.lease("job:nightly-report", 30_000);
    assert.notEqual(other, null);
    try {
      assert.deepEqual(await runSnippet("lease"), [{ method: "lease", args: ["job:nightly-report", 30_000], result: null }]);
    } finally {
      assert.equal(await admin.release("job:nightly-report", other), true);
    }
  });

  await check("semaphore snippet: a decimal-string token, released; null when all 8 slots are taken", async () => {
    const calls = await runSnippet("semaphore");
    assert.equal(calls[0].method, "semaphore");
    assert.match(calls[0].result, /^[1-9][0-9]*$/);
    assert.deepEqual(calls[1], { method: "release", args: ["upstream:billing", calls[0].result], result: true });
    const held = [];
    for (let i = 0; i < 8; i++) held.push(await admin.semaphore("upstream:billing", 8, 15_000));
    try {
      assert.deepEqual(await runSnippet("semaphore"), [{ method: "semaphore", args: ["upstream:billing", 8, 15_000], result: null }]);
    } finally {
      for (const t of held) assert.equal(await admin.release("upstream:billing", t), true);
    }
  });

  const runExample = (name) =>
    execFileSync(process.execPath, [path.join("examples", name)], {
      cwd: root,
      env: { ...process.env, RUVIO_URL: `redis://127.0.0.1:${server.port}` },
      encoding: "utf8",
      timeout: 60_000,
    }).trim();

  await check("examples/fenced-job.mjs", () => {
    assert.equal(runExample("fenced-job.mjs"), "wrote 3 parts");
  });

  await check("examples/commands.mjs", () => {
    assert.deepEqual(runExample("commands.mjs").split("\n"), ["OK", "[ 1, '1' ]", "[ 'OK' ]", "hello subscribers"]);
  });

  await check("Symbol.asyncDispose exists once the client is loaded, and is Node.js's own symbol", () => {
    assert.equal(typeof Symbol.asyncDispose, "symbol");
    assert.equal(Symbol.asyncDispose, Symbol.for("nodejs.asyncDispose"));
    assert.equal(typeof LockHandle.prototype[Symbol.asyncDispose], "function");
    assert.equal(Object.prototype.hasOwnProperty.call(LockHandle.prototype, "undefined"), false, "no method keyed 'undefined'");
  });

  await check("[Symbol.asyncDispose]() releases a lock handle and closes a client (ES modules)", async () => {
    const c = createClient({ port: server.port });
    const k = key("esm");
    const lock = await c.acquire(k, 5000);
    assert.notEqual(lock, null);
    await lock[Symbol.asyncDispose]();
    assert.equal(await admin.lockInfo(k), null, "released");
    await c[Symbol.asyncDispose]();
    await assert.rejects(c.ping(), { name: "ConnectionError" });
  });

  await check("[Symbol.asyncDispose]() releases a lock handle and closes a client (CommonJS require)", async () => {
    const cjs = requireFromHere("ruvio-client");
    assert.notEqual(cjs.createClient, createClient, "the CommonJS build, not the ES module one");
    assert.equal(typeof cjs.LockHandle.prototype[Symbol.asyncDispose], "function");
    const c = cjs.createClient({ port: server.port });
    const k = key("cjs");
    const lock = await c.acquire(k, 5000);
    await lock[Symbol.asyncDispose]();
    assert.equal(await admin.lockInfo(k), null, "released");
    await c[Symbol.asyncDispose]();
    await assert.rejects(c.ping(), { name: "ConnectionError" });
  });

  await check("`await using` compiled by TypeScript (target ES2022) releases and closes at the end of the scope", async () => {
    const work = mkdtempSync(path.join(os.tmpdir(), "ruvio-node-compat-"));
    try {
      writeFileSync(
        path.join(work, "app.ts"),
        `import { createClient } from "ruvio-client";
const [port, key] = [Number(process.argv[2]), process.argv[3]];
let seen: string | null = null;
{
  await using c = createClient({ port });
  await using lock = await c.acquire(key, 5000);
  seen = lock === null ? null : lock.token;
}
const check = createClient({ port });
console.log(JSON.stringify({ token: seen, after: await check.lockInfo(key) }));
await check.close();
`,
      );
      writeFileSync(
        path.join(work, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: "ES2022",
            moduleResolution: "Bundler",
            lib: ["ES2022", "ESNext.Disposable"],
            strict: true,
            skipLibCheck: true,
            types: ["node"],
            typeRoots: [path.join(root, "node_modules/@types")],
            paths: { "ruvio-client": [path.join(root, "dist/esm/index.d.ts")] },
            outDir: work,
          },
          files: [path.join(work, "app.ts")],
        }),
      );
      const tsc = requireFromHere.resolve("typescript/bin/tsc");
      execFileSync(process.execPath, [tsc, "-p", path.join(work, "tsconfig.json")], { cwd: work, encoding: "utf8" });
      const js = readFileSync(path.join(work, "app.js"), "utf8");
      assert.doesNotMatch(js, /await using/, "tsc lowered `await using`");
      // Resolve 'ruvio-client' to this package's ES module build, as an installed package would be.
      writeFileSync(path.join(work, "app.mjs"), js.replace('"ruvio-client"', JSON.stringify(pathToFileURL(path.join(root, "dist/esm/index.js")).href)));
      const k = key("ts-await-using");
      const out = JSON.parse(execFileSync(process.execPath, [path.join(work, "app.mjs"), String(server.port), k], { encoding: "utf8", timeout: 60_000 }));
      assert.match(out.token, /^[1-9][0-9]*$/);
      assert.equal(out.after, null, "the lock was released at the end of the scope");
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  let nativeAwaitUsing = true;
  try {
    new Function("return async () => { await using x = null; }");
  } catch {
    nativeAwaitUsing = false;
  }
  if (nativeAwaitUsing) {
    await check("native `await using` releases and closes at the end of the scope", async () => {
      const k = key("native-await-using");
      const body = `{ await using c = createClient({ port }); await using lock = await c.acquire(key, 5000); seen = lock.token; }`;
      const fn = new Function("createClient", "port", "key", `return (async () => { let seen = null; ${body} return seen; })();`);
      const token = await fn(createClient, server.port, k);
      assert.match(token, /^[1-9][0-9]*$/);
      assert.equal(await admin.lockInfo(k), null, "released");
    });
  } else {
    console.log(`# native \`await using\` syntax: Node.js ${process.version} cannot parse it (not checked here; the compiled form above is)`);
  }
} finally {
  await admin.close();
  await server.cleanup();
}

const passed = results.filter(Boolean).length;
const failed = results.length - passed;
console.log(`compat: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
