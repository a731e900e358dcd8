// The lock helper: acquire/using, background renewals over several TTLs, the loss signal (server paused past the
// TTL, RENEW answering 0, the hold cap), release after loss.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient as realCreateClient, LockHandle, LockLostError, LockNotAcquiredError } from "ruvio-client";
import { sleep, startRuvio, waitFor } from "./helpers.mjs";

let server;
let admin;
// Every client a test opens is closed at the end even when the test fails (an open socket would keep the file's
// process alive).
const opened = [];
function createClient(opts) {
  const c = realCreateClient(opts);
  opened.push(c);
  return c;
}
const run = Math.random().toString(36).slice(2, 8);
let n = 0;
const key = (name) => `l:${run}:${++n}:${name}`;

async function renewals() {
  const info = await admin.call("INFO", "locks");
  return Number(/lock_renewals:(\d+)/.exec(info)[1]);
}

function abortedAt(signal) {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(performance.now());
    signal.addEventListener("abort", () => resolve(performance.now()), { once: true });
  });
}

before(async () => {
  server = await startRuvio();
  admin = createClient({ port: server.port });
});
after(async () => {
  for (const c of opened) c.disconnect();
  await admin?.close();
  await server?.cleanup();
});

test("acquire: renews in the background over several TTLs, then releases", async () => {
  const c = createClient({ port: server.port });
  const k = key("renewed");
  const before = await renewals();
  const h = await c.acquire(k, 600);
  assert.ok(h instanceof LockHandle);
  assert.match(h.token, /^[1-9]\d*$/);
  assert.equal(h.key, k);
  assert.equal(h.lost, false);
  await sleep(2000); // more than three TTLs
  assert.equal(h.signal.aborted, false, "still held");
  assert.ok(h.remainingMs > 0);
  const info = await admin.lockInfo(k);
  assert.deepEqual(info.holders.map((x) => x.token), [h.token]);
  assert.ok((await renewals()) - before >= 3, "renewed at about TTL/3");
  assert.equal(await c.acquire(k, 600), null, "someone else cannot take it");
  assert.equal(await h.release(), true);
  assert.equal(await h.release(), false, "a second release answers false");
  assert.equal(await admin.lockInfo(k), null);
  await c.close();
});

test("server paused past the TTL: the signal aborts before the server-side deadline; release then answers false", async () => {
  const c = createClient({ port: server.port });
  const k = key("paused");
  const ttl = 3000;
  const h = await c.acquire(k, ttl);
  const before = await renewals();
  await waitFor(async () => (await renewals()) > before, 10_000, "a first renewal");
  const aborted = abortedAt(h.signal);
  const pausedAt = performance.now();
  await server.pause();
  let at;
  try {
    at = await Promise.race([aborted, sleep(10_000).then(() => null)]);
  } finally {
    server.resume();
  }
  assert.notEqual(at, null, "the signal aborted");
  // The last successful renewal was sent before the pause, at lastSend, so the client may only count on the lock
  // until lastSend + ttl <= pausedAt + ttl (the server's deadline is at or after that). The signal fires before.
  assert.ok(at < pausedAt + ttl, `aborted ${at - pausedAt} ms after the pause, TTL ${ttl} ms`);
  assert.ok(h.signal.reason instanceof LockLostError);
  assert.equal(h.signal.reason.key, k);
  assert.equal(h.signal.reason.token, h.token);
  assert.equal(h.lost, true);
  assert.equal(h.remainingMs, 0);
  assert.equal(await h.release(), false, "release after loss: false, no throw");
  await c.close();
});

test("RENEW answering 0 (the lock was broken): the signal aborts, release answers false", async () => {
  const c = createClient({ port: server.port });
  const k = key("broken");
  const h = await c.acquire(k, 900);
  const aborted = abortedAt(h.signal);
  assert.equal(await admin.del(k), 1);
  await Promise.race([aborted, sleep(10_000)]);
  assert.equal(h.lost, true);
  assert.match(h.signal.reason.message, /RENEW answered 0/);
  assert.equal(await h.release(), false);
  await c.close();
});

test("maxHoldMs caps the total hold: renewals stop extending, the signal aborts before the capped deadline", async () => {
  const c = createClient({ port: server.port });
  const k = key("capped");
  const start = performance.now();
  const h = await c.acquire(k, 1500, { maxHoldMs: 3000 });
  const at = await Promise.race([abortedAt(h.signal), sleep(10_000).then(() => null)]);
  assert.notEqual(at, null);
  assert.ok(at - start <= 3000, `aborted after ${at - start} ms`);
  assert.ok(at - start >= 1500, `held past one TTL (renewed) before the cap: ${at - start} ms`);
  assert.match(h.signal.reason.message, /hold cap/);
  // The server lets it expire by itself soon after.
  await waitFor(async () => (await admin.lockInfo(k)) === null, 10_000, "the capped lock to expire");
  assert.equal(await h.release(), false);
  await c.close();
});

test("autoRenew false: no renewal, the signal still aborts before the deadline", async () => {
  const c = createClient({ port: server.port });
  const k = key("norenew");
  const start = performance.now();
  const h = await c.acquire(k, 500, { autoRenew: false });
  const at = await Promise.race([abortedAt(h.signal), sleep(10_000).then(() => null)]);
  assert.ok(at !== null && at - start < 500);
  await h.release();
  await c.close();
});

test("using(): runs the routine with the signal, returns its result, releases at the end", async () => {
  const c = createClient({ port: server.port });
  const k = key("using");
  let seen;
  const result = await c.using(k, 5000, async (signal, handle) => {
    assert.equal(signal.aborted, false);
    seen = handle.token;
    const info = await admin.lockInfo(k);
    assert.deepEqual(info.holders.map((x) => x.token), [handle.token]);
    // Fence a write with the token.
    assert.equal(await c.ifgt(`${k}:data`, handle.token, "v"), true);
    return 42;
  });
  assert.equal(result, 42);
  assert.match(seen, /^\d+$/);
  assert.equal(await admin.lockInfo(k), null, "released");

  // Held by someone else: LockNotAcquiredError, the routine does not run.
  const other = await admin.lease(k, 10_000);
  let ran = false;
  await assert.rejects(
    c.using(k, 5000, async () => {
      ran = true;
    }),
    (e) => e instanceof LockNotAcquiredError && e.key === k,
  );
  assert.equal(ran, false);
  // With waitMs it waits in the server's fair queue.
  setTimeout(() => void admin.release(k, other), 200);
  assert.equal(await c.using(k, 5000, { waitMs: 10_000 }, async (signal) => signal.aborted), false);

  // A throwing routine still releases, and its error propagates.
  await assert.rejects(
    c.using(k, 5000, async () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal(await admin.lockInfo(k), null);
  await c.close();
});

test("using(): a routine that outlives a broken lock sees its signal abort", async () => {
  const c = createClient({ port: server.port });
  const k = key("using-lost");
  const reason = await c.using(k, 600, async (signal) => {
    await admin.del(k);
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    return signal.reason;
  });
  assert.ok(reason instanceof LockLostError);
  await c.close();
});

test("a waiting LEASE on the same client does not hold up the helper's renewals or other commands", async () => {
  const c = createClient({ port: server.port });
  const k = key("held");
  const busy = key("busy");
  const other = await admin.lease(busy, 30_000);
  const h = await c.acquire(k, 900);
  const started = performance.now();
  // Waits on the server for 3 s (more than three TTLs of the held lock) ...
  const waiting = c.lease(busy, 30_000, { waitMs: 3000 });
  // ... while the same client keeps answering at once ...
  assert.equal(await c.ping(), "PONG");
  assert.ok(performance.now() - started < 2500, "PING was not queued behind the waiting LEASE");
  assert.equal(await waiting, null);
  // ... and the helper renewed all along.
  assert.equal(h.lost, false);
  assert.deepEqual((await admin.lockInfo(k)).holders.map((x) => x.token), [h.token]);
  assert.equal(await h.release(), true);
  await admin.release(busy, other);
  await c.close();
});

test("semaphore slots through acquire({ limit }), and Symbol.asyncDispose on the handle", async () => {
  const c = createClient({ port: server.port });
  const k = key("sem");
  const a = await c.acquire(k, 5000, { limit: 2 });
  const b = await c.acquire(k, 5000, { limit: 2 });
  assert.equal(await c.acquire(k, 5000, { limit: 2 }), null);
  assert.deepEqual((await admin.lockInfo(k)).holders.map((x) => x.token), [a.token, b.token]);
  await a[Symbol.asyncDispose]();
  assert.deepEqual((await admin.lockInfo(k)).holders.map((x) => x.token), [b.token]);
  assert.equal(await b.release(), true);
  assert.equal(await admin.lockInfo(k), null);
  await c.close();
});
