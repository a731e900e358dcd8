// Packaging: `npm pack` makes the tarball; installed in a fresh folder it runs the product post's snippet (ESM),
// loads with require() (CommonJS), and its declarations type-check a TypeScript consumer (ESM and CommonJS).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startRuvio } from "./helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const pkgDir = path.resolve(here, "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
let server;
let work;
let consumer;

const npm = (args, cwd) => execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

before(async () => {
  server = await startRuvio();
  work = mkdtempSync(path.join(os.tmpdir(), "ruvio-node-pack-"));
  npm(["pack", "--pack-destination", work, "--loglevel=error"], pkgDir);
  const tarball = readdirSync(work).find((f) => f.endsWith(".tgz"));
  assert.ok(tarball, "npm pack made a tarball");
  consumer = path.join(work, "app");
  execFileSync("mkdir", ["-p", consumer]);
  writeFileSync(path.join(consumer, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  npm(["install", "--no-audit", "--no-fund", "--offline", "--loglevel=error", path.join(work, tarball)], consumer);
});
after(async () => {
  await server?.cleanup();
  if (work) rmSync(work, { recursive: true, force: true });
});

test("the tarball holds the built package and no tests", () => {
  const files = execFileSync("tar", ["-tzf", path.join(work, readdirSync(work).find((f) => f.endsWith(".tgz")))], { encoding: "utf8" });
  assert.match(files, /package\/dist\/esm\/index\.js/);
  assert.match(files, /package\/dist\/esm\/index\.d\.ts/);
  assert.match(files, /package\/dist\/cjs\/index\.js/);
  assert.match(files, /package\/dist\/cjs\/index\.d\.ts/);
  assert.match(files, /package\/README\.md/);
  assert.doesNotMatch(files, /package\/test\//);
  assert.doesNotMatch(files, /package\/src\//);
});

test("installed from the tarball, the product post's snippet runs verbatim", () => {
  // The snippet is copied unchanged; a resolve hook points its 'ruvio-client' at a wrapper around the installed
  // package that redirects port 6379 to the test server and records the calls.
  copyFileSync(path.join(here, "snippets", "lease.mjs"), path.join(consumer, "snippet.mjs"));
  copyFileSync(path.join(here, "snippets", "recording-client.mjs"), path.join(consumer, "recording-client.mjs"));
  writeFileSync(
    path.join(consumer, "hooks.mjs"),
    `export async function resolve(s, ctx, next) {
  if (s === "ruvio-client" && (ctx.parentURL ?? "").endsWith("/snippet.mjs")) {
    return { url: new URL("./recording-client.mjs", import.meta.url).href, shortCircuit: true };
  }
  return next(s, ctx);
}
`,
  );
  writeFileSync(
    path.join(consumer, "run.mjs"),
    `import { register } from "node:module";
register("./hooks.mjs", import.meta.url);
const h = { port: Number(process.argv[2]), options: [], clients: [], calls: [] };
globalThis.__ruvioSnippetHarness = h;
await import("./snippet.mjs");
await Promise.all(h.clients.map((c) => c.close()));
console.log(JSON.stringify({ options: h.options, calls: h.calls }));
`,
  );
  const out = JSON.parse(execFileSync(process.execPath, ["run.mjs", String(server.port)], { cwd: consumer, encoding: "utf8" }));
  assert.deepEqual(out.options, [{ host: "127.0.0.1", port: 6379 }]);
  assert.equal(out.calls[0].method, "lease");
  assert.match(out.calls[0].result, /^[1-9]\d*$/);
  assert.deepEqual(out.calls[1], { method: "release", args: ["job:nightly-report", out.calls[0].result], result: true });
});

test("CommonJS require() works", () => {
  const out = execFileSync(
    process.execPath,
    [
      "-e",
      `const { createClient, ReplyError } = require('ruvio-client');
       const c = createClient({ port: ${server.port} });
       c.lease('cjs:' + Date.now(), 1000).then(async (t) => { console.log(typeof t, ReplyError.name); await c.close(); });`,
    ],
    { cwd: consumer, encoding: "utf8" },
  );
  assert.equal(out.trim(), "string ReplyError");
});

test("the declarations type-check a TypeScript consumer (ESM with await using, and CommonJS)", () => {
  writeFileSync(
    path.join(consumer, "app.ts"),
    `import { createClient, type LockHandle, ReplyError, TimeoutError } from "ruvio-client";

export async function main(): Promise<void> {
  await using c = createClient({ host: "127.0.0.1", port: 6379, commandTimeout: 2000 });
  const token: string | null = await c.lease("job:nightly-report", 30_000);
  if (token !== null) {
    const released: boolean = await c.release("job:nightly-report", token);
    void released;
  }
  await c.renew("k", 123n, 1000);
  const result: number = await c.using("k", 1000, async (signal: AbortSignal, h: LockHandle) => {
    if (signal.aborted) throw signal.reason;
    return h.token.length;
  });
  void result;
  try {
    await c.call("GET", "k");
  } catch (e) {
    if (e instanceof ReplyError) console.log(e.code);
    if (e instanceof TimeoutError) console.log(e.sent);
  }
}
`,
  );
  writeFileSync(
    path.join(consumer, "cjs.cts"),
    `import { createClient } from "ruvio-client";
const c = createClient({ url: "redis://127.0.0.1:6379" });
export const p: Promise<string | null> = c.semaphore("s", 8, 15_000);
`,
  );
  const common = ["--noEmit", "--strict", "--target", "ES2022", "--lib", "ES2022,ESNext.Disposable", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--types", "node", "--typeRoots", path.join(pkgDir, "node_modules/@types")];
  execFileSync(process.execPath, [tsc, ...common, "app.ts", "cjs.cts"], { cwd: consumer, encoding: "utf8" });
});
