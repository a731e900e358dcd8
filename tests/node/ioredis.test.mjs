// ioredis against the server under test: ioredis 6 (RESP3 via HELLO 3 by default, and RESP2)
// and ioredis 5 (RESP2; handshake sends lower-case `info`).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import Redis6 from "ioredis";
import Redis5 from "ioredis5";
import { startServer } from "./server.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const T = { timeout: 30_000 }; // every test and hook is bounded

async function closeClient(c) {
  // QUIT politely, but never wait on a server that stopped answering
  await Promise.race([c.quit().catch(() => {}), sleep(2000)]);
  c.disconnect();
}

async function waitUntil(pred, timeoutMs = 5000, what = "condition") {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const VARIANTS = [
  { name: "ioredis6-resp3", Redis: Redis6, opts: {}, resp: 3 },
  { name: "ioredis6-resp2", Redis: Redis6, opts: { protocol: 2 }, resp: 2 },
  { name: "ioredis5-resp2", Redis: Redis5, opts: {}, resp: 2 },
];

let server;
before(async () => {
  server = await startServer();
}, T);
after(async () => {
  await server?.stop();
}, T);

for (const variant of VARIANTS) {
  describe(variant.name, () => {
    const clients = [];
    const make = (extra = {}) => {
      const c = new variant.Redis({
        host: "127.0.0.1",
        port: server.port,
        maxRetriesPerRequest: 1,
        commandTimeout: 10_000,
        retryStrategy: () => null, // never reconnect in tests: surface errors instead
        connectionName: `test-${variant.name}`,
        ...variant.opts,
        ...extra,
      });
      clients.push(c);
      return c;
    };
    let r;
    before(async () => {
      r = make();
      await r.flushall();
    }, T);
    after(async () => {
      await Promise.all(clients.map(closeClient));
    }, T);

    test("handshake completed and connection name set", T, async () => {
      assert.equal(await r.ping(), "PONG");
      assert.equal(await r.client("getname"), `test-${variant.name}`);
      const info = await r.info("server");
      assert.match(info, /redis_version:/);
      const me = await r.client("info");
      assert.match(me, new RegExp(`\\bresp=${variant.resp}\\b`));
      assert.match(me, new RegExp(`\\bname=test-${variant.name}\\b`));
    });

    test("strings", T, async () => {
      const p = `${variant.name}:`;
      assert.equal(await r.set(`${p}a`, "1"), "OK");
      assert.equal(await r.get(`${p}a`), "1");
      assert.equal(await r.get(`${p}missing`), null);
      assert.equal(await r.incr(`${p}a`), 2);
      assert.equal(await r.incrby(`${p}a`, 10), 12);
      assert.equal(await r.decr(`${p}a`), 11);
      assert.equal(await r.append(`${p}a`, "x"), 3);
      assert.equal(await r.strlen(`${p}a`), 3);
      assert.equal(await r.getrange(`${p}a`, 0, 1), "11");
      assert.equal(await r.mset(`${p}m1`, "v1", `${p}m2`, "v2"), "OK");
      assert.deepEqual(await r.mget(`${p}m1`, `${p}missing`, `${p}m2`), ["v1", null, "v2"]);
      assert.equal(await r.set(`${p}a`, "new", "GET"), "11x");
      assert.equal(await r.setnx(`${p}a`, "no"), 0);
      assert.equal(await r.getdel(`${p}a`), "new");
      assert.equal(await r.exists(`${p}a`), 0);
      assert.equal(String(await r.incrbyfloat(`${p}f`, "1.5")), "1.5");
      const bin = Buffer.from([0, 13, 10, 255, 0]);
      await r.set(`${p}bin`, bin);
      assert.deepEqual(await r.getBuffer(`${p}bin`), bin);
      await r.set(`${p}big`, "9223372036854775807");
      await assert.rejects(r.incr(`${p}big`), /increment or decrement would overflow/);
      await assert.rejects(r.call("foo", "bar"), /unknown command 'foo', with args beginning with: 'bar'/);
    });

    test("expiry", T, async () => {
      const k = `${variant.name}:exp`;
      await r.set(k, "v", "EX", 100);
      const ttl = await r.ttl(k);
      assert.ok(ttl > 95 && ttl <= 100, `ttl ${ttl}`);
      assert.equal(await r.persist(k), 1);
      assert.equal(await r.ttl(k), -1);
      assert.equal(await r.pexpire(k, 50), 1);
      await waitUntil(async () => (await r.get(k)) === null, 5000, "key to expire");
      assert.equal(await r.exists(k), 0);
      assert.equal(await r.ttl(k), -2);
      await r.set(k, "v", "PX", 100000);
      assert.equal(await r.expire(k, 10, "GT"), 0);
      assert.equal(await r.expire(k, 10, "LT"), 1);
    });

    test("pipeline", T, async () => {
      const p = `${variant.name}:pipe`;
      const pipe = r.pipeline();
      for (let i = 0; i < 50; i++) pipe.set(`${p}:${i}`, String(i));
      pipe.incr(`${p}:ctr`).incr(`${p}:ctr`).get(`${p}:7`).get(`${p}:missing`);
      pipe.call("nosuchcommand");
      const res = await pipe.exec();
      assert.equal(res.length, 55);
      for (let i = 0; i < 50; i++) assert.deepEqual(res[i], [null, "OK"]);
      assert.deepEqual(res.slice(50, 54), [[null, 1], [null, 2], [null, "7"], [null, null]]);
      assert.match(res[54][0].message, /unknown command 'nosuchcommand'/);
      assert.equal(await r.ping(), "PONG");
    });

    test("multi/exec and watch", T, async () => {
      const k = `${variant.name}:tx`;
      const res = await r.multi().set(k, "1").incr(k).get(k).exec();
      assert.deepEqual(res, [[null, "OK"], [null, 2], [null, "2"]]);

      // WATCH: another client writes -> EXEC returns null
      const a = make();
      const b = make();
      await a.watch(k);
      await b.set(k, "changed");
      const aborted = await a.multi().set(k, "mine").exec();
      assert.equal(aborted, null);
      assert.equal(await r.get(k), "changed");

      // WATCH without interference succeeds
      await a.watch(k);
      const ok = await a.multi().set(k, "mine").exec();
      assert.deepEqual(ok, [[null, "OK"]]);
      assert.equal(await r.get(k), "mine");

      // a queued error aborts the whole transaction
      await assert.rejects(a.multi().set(k, "x").call("nosuchcommand").exec(), /EXECABORT/);
      assert.equal(await r.get(k), "mine");
    });

    test("pub/sub", T, async () => {
      const sub = make({ connectionName: undefined });
      const pub = make();
      const ch = `${variant.name}:chan`;
      const got = [];
      sub.on("message", (channel, message) => got.push(["message", channel, message]));
      sub.on("pmessage", (pattern, channel, message) => got.push(["pmessage", pattern, channel, message]));
      assert.equal(await sub.subscribe(ch), 1);
      assert.equal(await sub.psubscribe(`${variant.name}:*`), 2);
      assert.equal(await pub.publish(ch, "hello"), 2);
      assert.equal(await pub.publish(`${variant.name}:other`, "p"), 1);
      assert.equal(await pub.publish("unrelated", "x"), 0);
      await waitUntil(() => got.length >= 3, 5000, "messages");
      assert.deepEqual(
        got.slice().sort(),
        [
          ["message", ch, "hello"],
          ["pmessage", `${variant.name}:*`, ch, "hello"],
          ["pmessage", `${variant.name}:*`, `${variant.name}:other`, "p"],
        ].sort(),
      );
      assert.deepEqual(await pub.pubsub("NUMSUB", ch), [ch, 1]);
      await sub.unsubscribe(ch);
      await sub.punsubscribe();
      assert.equal(await pub.publish(ch, "after"), 0);
    });
  });
}
