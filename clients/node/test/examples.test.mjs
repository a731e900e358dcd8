// The README's runnable examples (examples/*.mjs) run against a real ruvio and print what they should.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
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

const runExample = (name) =>
  execFileSync(process.execPath, [path.join("examples", name)], {
    cwd: root,
    env: { ...process.env, RUVIO_URL: `redis://127.0.0.1:${server.port}` },
    encoding: "utf8",
    timeout: 60_000,
  });

test("examples/fenced-job.mjs", () => {
  assert.equal(runExample("fenced-job.mjs").trim(), "wrote 3 parts");
  // A second run holds a newer token: its writes pass the fence again.
  assert.equal(runExample("fenced-job.mjs").trim(), "wrote 3 parts");
});

test("examples/commands.mjs", () => {
  const out = runExample("commands.mjs").trim().split("\n");
  assert.deepEqual(out, ["OK", "[ 1, '1' ]", "[ 'OK' ]", "hello subscribers"]);
});
