// Every public method of the client against a real ruvio: commands, types in RESP3 and RESP2, pipelines,
// transactions with WATCH, pub/sub, connection options, lock commands.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient as realCreateClient, ReplyError, RuvioClient, ConnectionError, Pipeline, Transaction } from "ruvio-client";
import { startRuvio, waitFor } from "./helpers.mjs";

let server;
// Every client is closed at the end even when a test fails (an open socket would keep the process alive).
const clients = [];
function createClient(opts) {
  const c = realCreateClient(opts);
  clients.push(c);
  return c;
}
const open = (opts = {}) => createClient({ port: server.port, ...opts });
const run = Math.random().toString(36).slice(2, 8);
let n = 0;
const key = (name) => `t:${run}:${++n}:${name}`;

before(async () => {
  server = await startRuvio();
});
after(async () => {
  for (const c of clients) c.disconnect();
  await server?.cleanup();
});

for (const protocol of [3, 2]) {
  describe(`RESP${protocol}`, () => {
    test("commands called right after createClient wait for the connection", async () => {
      const c = open({ protocol });
      assert.equal(c.isReady, false);
      const k = key("a");
      const [set, got] = await Promise.all([c.set(k, "hello"), c.get(k)]);
      assert.equal(set, "OK");
      assert.equal(got, "hello");
      assert.equal(c.protocol, protocol);
      assert.equal(c.isReady, true);
    });

    test("any command, with natural types", async () => {
      const c = open({ protocol });
      const k = key("types");
      assert.equal(await c.ping(), "PONG");
      assert.equal(await c.ping("hi"), "hi");
      assert.equal(await c.get(key("missing")), null);
      assert.equal(await c.call("SET", k, 10), "OK");
      assert.equal(await c.incr(k), 11);
      // Integers beyond 2^53 come back exactly, as bigint.
      assert.equal(await c.call("INCRBY", k, "9007199254740993"), 9007199254741004n);
      assert.equal(await c.sendCommand(["EXISTS", k, key("no")]), 1);
      assert.equal(await c.exists(k), 1);
      assert.equal(await c.pexpire(k, 60_000), 1);
      const pttl = await c.pttl(k);
      assert.ok(pttl > 0 && pttl <= 60_000);
      assert.equal(await c.del(k), 1);
      const hello = await c.call("HELLO");
      if (protocol === 3) assert.equal(hello.server, "ruvio");
      else assert.equal(hello[1], "ruvio");
      // Binary-safe arguments.
      const bin = Buffer.from([0, 1, 2, 255]);
      await c.set(k, bin);
      assert.equal(await c.call("STRLEN", k), 4);
      // UTF-8 values.
      await c.set(k, "grüße ✓");
      assert.equal(await c.get(k), "grüße ✓");
      const info = await c.call("INFO", "server");
      assert.equal(typeof info, "string");
      assert.match(info, /# Server/);
    });

    test("error replies reject with ReplyError and its code", async () => {
      const c = open({ protocol });
      const k = key("lock");
      await c.lease(k, 10_000);
      await assert.rejects(c.get(k), (e) => {
        assert.ok(e instanceof ReplyError);
        assert.equal(e.code, "WRONGTYPE");
        assert.equal(e.fateUnknown, false);
        assert.deepEqual(e.command, ["GET", k]);
        return true;
      });
      await assert.rejects(c.call("NOSUCHCOMMAND"), (e) => e instanceof ReplyError && e.code === "ERR");
      await assert.rejects(c.lease(k, 0), /invalid ttl_ms/);
      // The connection is still usable.
      assert.equal(await c.ping(), "PONG");
    });

    test("lease, renew, release, semaphore, ifgt, lockInfo with string tokens (bigint accepted)", async () => {
      const c = open({ protocol });
      const k = key("lease");
      const t1 = await c.lease(k, 10_000);
      assert.match(t1, /^[1-9]\d*$/);
      assert.equal(await c.lease(k, 10_000), null);
      assert.equal(await c.renew(k, t1, 20_000), true);
      assert.equal(await c.renew(k, BigInt(t1), 20_000), true);
      assert.equal(await c.renew(k, "1", 20_000), false);
      const info = await c.lockInfo(k);
      assert.equal(info.kind, "lease");
      assert.equal(info.limit, 1);
      assert.equal(info.waiters, 0);
      assert.equal(info.holders.length, 1);
      assert.equal(info.holders[0].token, t1);
      assert.ok(info.holders[0].remainingMs > 10_000 && info.holders[0].remainingMs <= 20_000);
      assert.equal(await c.release(k, BigInt(t1)), true);
      assert.equal(await c.release(k, t1), false);
      assert.equal(await c.lockInfo(k), null);

      const t2 = await c.lease(k, 10_000);
      assert.ok(BigInt(t2) > BigInt(t1), "tokens strictly increase");
      await c.release(k, t2);

      const s = key("sem");
      const a = await c.semaphore(s, 2, 10_000);
      const b = await c.semaphore(s, 2, 10_000);
      assert.equal(await c.semaphore(s, 2, 10_000), null);
      const sinfo = await c.lockInfo(s);
      assert.equal(sinfo.kind, "semaphore");
      assert.equal(sinfo.limit, 2);
      assert.deepEqual(sinfo.holders.map((h) => h.token), [a, b]);
      await assert.rejects(c.semaphore(s, 3, 10_000), /semaphore limit is 2, not 3/);
      assert.equal(await c.release(s, a), true);
      assert.equal(await c.release(s, b), true);

      const f = key("fenced");
      assert.equal(await c.ifgt(f, t2, "v2"), true);
      assert.equal(await c.ifgt(f, t1, "v1"), false);
      assert.equal(await c.get(f), "v2");
      assert.equal(await c.ifgt(f, BigInt(t2), "v2b", { px: 60_000 }), true);
      assert.ok((await c.pttl(f)) > 0);
      await assert.rejects(c.release(f, 2 ** 60), TypeError);
    });

    test("LEASE with WAIT is granted when the holder releases", async () => {
      const c = open({ protocol });
      const other = open({ protocol });
      const k = key("wait");
      const t1 = await c.lease(k, 30_000);
      const waiting = other.lease(k, 30_000, { waitMs: 20_000 });
      await waitFor(async () => (await c.lockInfo(k)).waiters === 1, 10_000, "the waiter to queue");
      assert.equal(await c.release(k, t1), true);
      const t2 = await waiting;
      assert.ok(BigInt(t2) > BigInt(t1));
      await other.release(k, t2);
      // A semaphore wait that runs out answers null.
      const s = key("semwait");
      const a = await c.semaphore(s, 1, 30_000);
      assert.equal(await other.semaphore(s, 1, 30_000, { waitMs: 100 }), null);
      await c.release(s, a);
    });

    test("pipelines: replies in order, errors as elements", async () => {
      const c = open({ protocol });
      const k = key("pipe");
      const p = c.pipeline();
      assert.ok(p instanceof Pipeline);
      p.set(k, "1").incr(k).get(k).call("LEASE", k, 100).del(k);
      assert.equal(p.length, 5);
      const r = await p.exec();
      assert.deepEqual(r.slice(0, 3), ["OK", 2, "2"]);
      assert.ok(r[3] instanceof ReplyError);
      assert.equal(r[3].code, "WRONGTYPE");
      assert.equal(r[4], 1);
      // Many concurrent callers on one client are answered correctly.
      const results = await Promise.all(Array.from({ length: 500 }, (_, i) => c.call("ECHO", `m${i}`)));
      assert.deepEqual(results, Array.from({ length: 500 }, (_, i) => `m${i}`));
    });

    test("MULTI/EXEC: atomic, runtime errors as elements, EXECABORT rejects", async () => {
      const c = open({ protocol });
      const k = key("tx");
      const tx = c.multi();
      assert.ok(tx instanceof Transaction);
      const r = await tx.set(k, "x").incr(k).get(k).exec();
      assert.equal(r[0], "OK");
      assert.ok(r[1] instanceof ReplyError);
      assert.equal(r[2], "x");
      await assert.rejects(c.multi().set(k, "y").call("NOSUCHCOMMAND").exec(), (e) => {
        assert.equal(e.code, "EXECABORT");
        assert.equal(e.errors.length, 1);
        return true;
      });
      assert.equal(await c.get(k), "x", "an aborted transaction changed nothing");
      // Lock commands inside a transaction.
      const lk = key("txlock");
      const [t, again] = await c.multi().call("LEASE", lk, 10_000).call("LEASE", lk, 10_000).exec();
      assert.equal(typeof t === "number" || typeof t === "bigint", true);
      assert.equal(again, null);
    });

    test("WATCH on a duplicate: EXEC answers null when the key changed, runs when it did not", async () => {
      const base = open({ protocol });
      const tx = base.duplicate();
      clients.push(tx);
      assert.ok(tx instanceof RuvioClient);
      const k = key("balance");
      await tx.watch(k); // right after creation: WATCH waits for the connection like any command
      await tx.unwatch();
      await base.set(k, 100);
      await tx.watch(k);
      const balance = Number(await tx.get(k));
      await base.set(k, 50); // someone else writes
      assert.equal(await tx.multi().set(k, balance + 10).exec(), null);
      assert.equal(await base.get(k), "50");
      await tx.watch(k);
      const b2 = Number(await tx.get(k));
      assert.deepEqual(await tx.multi().set(k, b2 + 10).exec(), ["OK"]);
      assert.equal(await base.get(k), "60");
      await tx.watch(k);
      assert.equal(await tx.unwatch(), "OK");
      await base.set(k, 1);
      assert.deepEqual(await tx.multi().get(k).exec(), ["1"]);
    });

    test("a connection lost between WATCH and EXEC: the transaction is rejected, never run unwatched", async () => {
      const base = open({ protocol });
      const name = `watcher-${run}-${protocol}`;
      const tx = open({ protocol, name });
      const k = key("watched");
      await tx.watch(k);
      const list = await base.call("CLIENT", "LIST");
      const id = /id=(\d+)/.exec(list.split("\n").find((l) => l.includes(`name=${name}`)))[1];
      assert.equal(await base.call("CLIENT", "KILL", "ID", id), 1);
      await assert.rejects(tx.multi().set(k, "unwatched").exec(), (e) => e instanceof ConnectionError);
      assert.equal(await tx.ping(), "PONG", "the client reconnects");
      assert.equal(await base.get(k), null, "nothing ran");
    });

    test("pub/sub: subscribe, psubscribe, listeners and events, unsubscribe", async () => {
      const sub = open({ protocol });
      const pub = open({ protocol });
      const ch = key("news");
      const got = [];
      const events = [];
      sub.on("message", (channel, message) => events.push(["message", channel, message]));
      sub.on("pmessage", (pattern, channel, message) => events.push(["pmessage", pattern, channel, message]));
      await sub.subscribe(ch, (message, channel) => got.push([channel, message]));
      await sub.psubscribe(`${ch}*`);
      assert.equal(await pub.publish(ch, "hello"), 2);
      await waitFor(() => events.length === 2, 10_000, "two deliveries");
      assert.deepEqual(got, [[ch, "hello"]]);
      assert.deepEqual(events.find((e) => e[0] === "message"), ["message", ch, "hello"]);
      assert.deepEqual(events.find((e) => e[0] === "pmessage"), ["pmessage", `${ch}*`, ch, "hello"]);
      if (protocol === 3) {
        // RESP3: the subscribed connection still runs commands.
        assert.equal(await sub.ping(), "PONG");
        assert.equal(await sub.set(key("x"), "1"), "OK");
      }
      await sub.unsubscribe(ch);
      await sub.punsubscribe();
      assert.equal(await pub.publish(ch, "again"), 0);
      await sub.unsubscribe();
      assert.equal(await sub.ping(), "PONG");
    });
  });
}

describe("connection options", () => {
  test("URL with password and database, name, auth errors", async () => {
    const secure = await startRuvio(["--requirepass", "s3cret"]);
    try {
      const c = createClient({ url: `redis://:s3cret@127.0.0.1:${secure.port}/2`, name: "node-test" });
      const k = key("db");
      await c.set(k, "in-db-2");
      assert.equal(await c.call("CLIENT", "GETNAME"), "node-test");
      const c0 = createClient({ url: `redis://default:s3cret@127.0.0.1:${secure.port}`, protocol: 2, name: "resp2" });
      assert.equal(await c0.get(k), null, "db 0 does not see db 2");
      assert.equal(await c0.call("CLIENT", "GETNAME"), "resp2");
      await c0.call("SELECT", 2);
      assert.equal(await c0.get(k), "in-db-2");
      await Promise.all([c.close(), c0.close()]);

      // A wrong password: the handshake's error reaches the command, with the server's code.
      const bad = createClient({ port: secure.port, password: "wrong", reconnect: false });
      await assert.rejects(bad.ping(), (e) => e instanceof ReplyError && e.code === "WRONGPASS");
      await bad.close();
      const bad2 = createClient({ port: secure.port, protocol: 2, password: "wrong", reconnect: false });
      await assert.rejects(bad2.ping(), (e) => e instanceof ReplyError && e.code === "WRONGPASS");
      await bad2.close();
      // No password at all: NOAUTH.
      const none = createClient({ port: secure.port });
      await assert.rejects(none.get("k"), (e) => e instanceof ReplyError && e.code === "NOAUTH");
      await none.close();
    } finally {
      await secure.cleanup();
    }
  });

  test("durability option: CLIENT DURABILITY REPLICAS n is sent and its error surfaced", async () => {
    const c = createClient({ port: server.port, durability: { replicas: 1 }, reconnect: false });
    // The option goes out as CLIENT DURABILITY REPLICAS 1 on connect; this server has no replica, so a write that
    // needs one is refused before it runs, with the server's own error.
    await assert.rejects(c.lease(key("durable"), 1000), (e) => {
      assert.ok(e instanceof ReplyError);
      assert.match(e.message, /NOREPLICAS/);
      return true;
    });
    assert.deepEqual(await c.sendCommand(["CLIENT", "DURABILITY"]), ["replicas", 1]);
    await c.close();
  });

  test("url parsing, option validation", () => {
    const c = new RuvioClient({ url: "rediss://u:p%40ss@example.com:6390/3?protocol=2", lazyConnect: true });
    assert.equal(c.options.host, "example.com");
    assert.equal(c.options.port, 6390);
    assert.equal(c.options.username, "u");
    assert.equal(c.options.password, "p@ss");
    assert.equal(c.options.db, 3);
    assert.equal(c.options.tls, true);
    assert.equal(c.options.protocol, 2);
    assert.throws(() => createClient({ url: "http://x" }), TypeError);
    assert.throws(() => createClient({ sentinels: [{ host: "h", port: 1 }] }), /serviceName/);
    c.disconnect();
  });

  test("lazyConnect and explicit connect()", async () => {
    const c = createClient({ port: server.port, lazyConnect: true });
    assert.equal(c.isReady, false);
    await c.connect();
    assert.equal(c.isReady, true);
    assert.deepEqual(c.address, { host: "127.0.0.1", port: server.port });
    await c.close();
    await assert.rejects(c.ping(), ConnectionError);
    await assert.rejects(c.connect(), ConnectionError);
  });

  test("close() waits for replies already asked for; disconnect() does not", async () => {
    const c = createClient({ port: server.port });
    const k = key("close");
    const pending = c.set(k, "v");
    const ended = new Promise((r) => c.once("end", r));
    await c.close();
    assert.equal(await pending, "OK");
    await ended;
    const d = createClient({ port: server.port });
    await d.ping();
    d.disconnect();
    await assert.rejects(d.ping(), ConnectionError);
  });

  test("Symbol.asyncDispose closes the client", async () => {
    const c = createClient({ port: server.port });
    await c.ping();
    await c[Symbol.asyncDispose]();
    await assert.rejects(c.ping(), ConnectionError);
  });
});
