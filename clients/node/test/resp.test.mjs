// The RESP decoder fed in pieces (replies split across socket reads at every possible byte), and large replies from
// a real server that arrive in many chunks.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient } from "ruvio-client";
import { Decoder, encodeCommand, Push } from "../dist/esm/resp.js";
import { ReplyError } from "../dist/esm/errors.js";
import { startRuvio } from "./helpers.mjs";

const STREAM = Buffer.from(
  "+OK\r\n" +
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n" +
    ":247950100148224\r\n" +
    ":9223372036854775807\r\n" +
    "$5\r\nh\r\nlo\r\n" +
    "$-1\r\n" +
    "*2\r\n:1\r\n*1\r\n$1\r\nx\r\n" +
    "%2\r\n$4\r\nkind\r\n$5\r\nlease\r\n$5\r\nlimit\r\n:1\r\n" +
    "~2\r\n+a\r\n+b\r\n" +
    ",1.5\r\n#t\r\n_\r\n(12345678901234567890\r\n" +
    "=15\r\ntxt:Some string\r\n" +
    ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n" +
    "|1\r\n+ttl\r\n:3\r\n+after-attribute\r\n",
);

function decodeAll(chunks) {
  const out = [];
  const d = new Decoder((v) => out.push(v));
  for (const c of chunks) d.push(c);
  assert.equal(d.buffered(), 0);
  return out;
}

test("a stream of every reply type decodes the same whole and split at every byte", () => {
  const whole = decodeAll([STREAM]);
  assert.equal(whole.length, 16);
  assert.equal(whole[0], "OK");
  assert.ok(whole[1] instanceof ReplyError && whole[1].code === "WRONGTYPE");
  assert.equal(whole[2], 247950100148224);
  assert.equal(whole[3], 9223372036854775807n);
  assert.equal(whole[4], "h\r\nlo");
  assert.equal(whole[5], null);
  assert.deepEqual(whole[6], [1, ["x"]]);
  assert.deepEqual(whole[7], { kind: "lease", limit: 1 });
  assert.deepEqual(whole[8], ["a", "b"]);
  assert.deepEqual(whole.slice(9, 13), [1.5, true, null, 12345678901234567890n]);
  assert.equal(whole[13], "Some string");
  assert.ok(whole[14] instanceof Push);
  assert.deepEqual(whole[14].data, ["message", "ch", "hi"]);
  assert.equal(whole[15], "after-attribute");
  const bytes = [...STREAM].map((b) => Buffer.from([b]));
  assert.deepEqual(decodeAll(bytes), whole);
  for (let cut = 1; cut < STREAM.length; cut++) {
    assert.deepEqual(decodeAll([STREAM.subarray(0, cut), STREAM.subarray(cut)]), whole, `split at ${cut}`);
  }
});

test("protocol violations throw instead of returning a value", () => {
  for (const bad of ["@x\r\n", ":12a\r\n", "$x\r\n", "$3\r\nabcd\r\n", "#x\r\n", ",abc\r\n"]) {
    const d = new Decoder(() => assert.fail(`a value from ${JSON.stringify(bad)}`));
    assert.throws(() => d.push(Buffer.from(bad)), /protocol error/, bad);
  }
});

test("the encoder writes RESP arrays of bulk strings (strings, numbers, bigints, Buffers, UTF-8)", () => {
  assert.equal(encodeCommand(["LEASE", "job:1", 30000]).toString(), "*3\r\n$5\r\nLEASE\r\n$5\r\njob:1\r\n$5\r\n30000\r\n");
  assert.equal(encodeCommand(["RENEW", "k", 9223372036854775807n, 1]).toString(), "*4\r\n$5\r\nRENEW\r\n$1\r\nk\r\n$19\r\n9223372036854775807\r\n$1\r\n1\r\n");
  assert.deepEqual(encodeCommand(["SET", "k", Buffer.from([0, 255])]), Buffer.from("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n\x00\xff\r\n", "latin1"));
  assert.equal(encodeCommand(["GET", "замок"]).toString(), "*2\r\n$3\r\nGET\r\n$10\r\nзамок\r\n");
});

let server;
before(async () => {
  server = await startRuvio();
});
after(async () => {
  await server?.cleanup();
});

test("large values and replies arrive in many reads and decode exactly (RESP3 and RESP2)", async () => {
  for (const protocol of [3, 2]) {
    const c = createClient({ port: server.port, protocol });
    const big = "x".repeat(3 * 1024 * 1024) + "ü";
    await c.set(`big:${protocol}`, big);
    assert.equal(await c.get(`big:${protocol}`), big);
    const keys = Array.from({ length: 2000 }, (_, i) => `many:${protocol}:${i}`);
    await c.call("MSET", ...keys.flatMap((k, i) => [k, `v${i}`]));
    const values = await c.call("MGET", ...keys);
    assert.deepEqual(values, keys.map((_, i) => `v${i}`));
    await c.close();
  }
});
