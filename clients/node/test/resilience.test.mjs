// Timeouts against a paused server, reconnect after a restart, unreachable servers, and the no-resend rule.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient as realCreateClient, ConnectionError, ConnectionLostError, TimeoutError } from "ruvio-client";
import { freePort, sleep, startRuvio, waitFor } from "./helpers.mjs";

let server;
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
const key = (name) => `r:${run}:${++n}:${name}`;

before(async () => {
  server = await startRuvio();
});
after(async () => {
  for (const c of opened) c.disconnect();
  await server?.cleanup();
});

test("a paused server (SIGSTOP): the command fails with TimeoutError within the command timeout, fate unknown", async () => {
  const c = createClient({ port: server.port, commandTimeout: 500 });
  await c.ping();
  await server.pause();
  try {
    const started = performance.now();
    await assert.rejects(c.lease(key("paused"), 10_000), (e) => {
      assert.ok(e instanceof TimeoutError, String(e));
      assert.equal(e.sent, true);
      assert.equal(e.fateUnknown, true);
      return true;
    });
    const took = performance.now() - started;
    assert.ok(took >= 490, `rejected after ${took} ms, not before the timeout`);
    assert.ok(took < 10_000, `rejected after ${took} ms`);
  } finally {
    server.resume();
  }
  // The connection is still usable after the server resumes (the late reply is dropped, replies stay in order).
  assert.equal(await c.call("ECHO", "after"), "after");
  await c.close();
});

test("an unreachable server is an error within the timeout, never a hang, and no unhandled 'error'", async () => {
  const port = await freePort(); // nothing listens there
  const c = createClient({ port, connectTimeout: 300, commandTimeout: 800 });
  const started = performance.now();
  await assert.rejects(c.ping(), (e) => {
    assert.ok(e instanceof TimeoutError, String(e));
    assert.equal(e.sent, false, "never sent: its fate is known");
    assert.equal(e.fateUnknown, false);
    return true;
  });
  assert.ok(performance.now() - started < 10_000);
  await c.close();
  // reconnect: false fails at once with ConnectionError.
  const d = createClient({ port, reconnect: false });
  await assert.rejects(d.ping(), ConnectionError);
  await d.close();
  // With a listener, connection errors are reported to it.
  const e = createClient({ port, reconnect: () => null });
  const errors = [];
  e.on("error", (err) => errors.push(err));
  await assert.rejects(e.ping(), ConnectionError);
  assert.ok(errors.length >= 1);
});

test("a server that does not answer the handshake: the connect timeout bounds it", async () => {
  await server.pause();
  try {
    const c = createClient({ port: server.port, connectTimeout: 300, commandTimeout: 0, reconnect: false });
    const started = performance.now();
    await assert.rejects(c.ping(), (e) => {
      // Whichever comes first: the handshake timeout, or the queued command's wait for a connection.
      assert.ok(e instanceof ConnectionError || (e instanceof TimeoutError && !e.sent), String(e));
      assert.equal(e.fateUnknown, false);
      return true;
    });
    assert.ok(performance.now() - started < 10_000);
    await c.close();
  } finally {
    server.resume();
  }
});

test("a restarted server is reconnected to; commands issued meanwhile run after the reconnect", async () => {
  const c = createClient({ port: server.port, commandTimeout: 20_000 });
  const events = [];
  for (const ev of ["ready", "reconnecting", "end"]) c.on(ev, () => events.push(ev));
  const k = key("restart");
  await c.set(k, "before");
  await server.restart();
  // Issued while the client may not have noticed yet, or while it is reconnecting.
  await waitFor(async () => (await c.set(k, "after")) === "OK", 30_000, "a command to succeed after the restart");
  assert.equal(await c.get(k), "after");
  assert.ok(events.includes("reconnecting"));
  assert.ok(events.filter((e) => e === "ready").length >= 2);
  await c.close();
  assert.equal(events.at(-1), "end");
});

test("an in-flight LEASE is failed with ConnectionLostError and never re-sent after the reconnect", async () => {
  const holder = createClient({ port: server.port });
  const victim = createClient({ port: server.port, name: `victim-${run}`, commandTimeout: 30_000 });
  const k = key("inflight");
  const t1 = await holder.lease(k, 30_000);
  await victim.ping();
  // The victim waits for the lock on the server: its LEASE is in flight.
  const waiting = victim.lease(k, 30_000, { waitMs: 20_000 });
  await waitFor(async () => (await holder.lockInfo(k)).waiters === 1, 10_000, "the victim to wait");
  // Cut the victim's connections from the server side (the waiting LEASE runs on one of its own).
  const list = await holder.call("CLIENT", "LIST");
  const ids = list
    .split("\n")
    .filter((l) => l.includes(`name=victim-${run}`))
    .map((l) => /id=(\d+)/.exec(l)[1]);
  assert.ok(ids.length >= 1);
  for (const id of ids) await holder.call("CLIENT", "KILL", "ID", id);
  await assert.rejects(waiting, (e) => {
    assert.ok(e instanceof ConnectionLostError, String(e));
    assert.equal(e.fateUnknown, true);
    return true;
  });
  // The victim reconnects (a new command goes through) ... Both of its connections were killed: a PING written on
  // the shared one before its close is noticed is itself lost with it (and says so), so ask until one is answered.
  await waitFor(async () => (await victim.ping()) === "PONG", 10_000, "the victim to reconnect");
  // ... and the LEASE was not sent again: after the holder releases, nobody is waiting and nobody is granted.
  assert.equal(await holder.release(k, t1), true);
  await sleep(300);
  assert.equal(await holder.lockInfo(k), null);
  await Promise.all([holder.close(), victim.close()]);
});

test("reconnect: false closes the client when its connection drops", async () => {
  const c = createClient({ port: server.port, name: `once-${run}`, reconnect: false });
  const admin = createClient({ port: server.port });
  await c.ping();
  const ended = new Promise((r) => c.once("end", r));
  const list = await admin.call("CLIENT", "LIST");
  const id = /id=(\d+)/.exec(list.split("\n").find((l) => l.includes(`name=once-${run}`)))[1];
  await admin.call("CLIENT", "KILL", "ID", id);
  await ended;
  assert.equal(c.isClosed, true);
  await assert.rejects(c.ping(), ConnectionError);
  await admin.close();
});

test("commands not yet written when the connection drops are sent after the reconnect", async () => {
  const c = createClient({ port: server.port, name: `queued-${run}`, commandTimeout: 20_000 });
  const admin = createClient({ port: server.port });
  await c.ping();
  const list = await admin.call("CLIENT", "LIST");
  const id = /id=(\d+)/.exec(list.split("\n").find((l) => l.includes(`name=queued-${run}`)))[1];
  await admin.call("CLIENT", "KILL", "ID", id);
  // The client learns about the loss, then commands go to the offline queue and run once reconnected.
  await waitFor(() => !c.isReady, 10_000, "the client to notice the loss").catch(() => {});
  const k = key("queued");
  assert.equal(await c.set(k, "v"), "OK");
  assert.equal(await admin.get(k), "v");
  await Promise.all([c.close(), admin.close()]);
});
