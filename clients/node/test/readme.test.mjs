// The README's first example, taken from README.md itself (so the README cannot drift from what works), run as its
// own `node` process against a real ruvio: it must print what it did and exit by itself (a client left open would
// keep the process running until the timeout kills it, which fails the test).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startRuvio } from "./helpers.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
let server;
before(async () => {
  server = await startRuvio();
});
after(async () => {
  await server?.cleanup();
});

test("README.md's first js example runs as written and exits", () => {
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  const block = readme.match(/```js\n([\s\S]*?)```/)[1];
  assert.equal(block.split("6379").length, 2, "the example names the port exactly once");
  // Only the port is replaced. The file sits in the package (examples/) so that 'ruvio-client' resolves to this
  // package, as it would for a user who installed it.
  const file = path.join(root, "examples", `.readme-first-${process.pid}.mjs`);
  writeFileSync(file, block.replace("6379", String(server.port)));
  try {
    const out = execFileSync(process.execPath, [file], { cwd: root, encoding: "utf8", timeout: 20_000 });
    const lines = out.trim().split("\n");
    assert.match(lines[0], /^holding job:nightly-report with token [1-9][0-9]*$/);
    assert.equal(lines[1], "released: true");
  } finally {
    rmSync(file, { force: true });
  }
});
