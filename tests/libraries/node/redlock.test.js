// node-redlock's normal flows (acquire, extend, release, `using` with automatic extension, contention) against
// ruvio, unchanged: the library runs its own Lua scripts with EVALSHA/EVAL. The same file runs against redis-server
// (LIBRARY_TARGET=redis), which proves the expectations are the library's, not Ruvio's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import Redis from 'ioredis';
import Redlock, { ExecutionError } from 'redlock';
import { startServer, target } from './server.js';

let server;
let client;

before(async () => {
  server = await startServer();
  client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 });
});

after(async () => {
  client.disconnect();
  await server.stop();
});

test(`acquire, extend, release (${target})`, async () => {
  const redlock = new Redlock([client], { retryCount: 0 });
  const lock = await redlock.acquire(['a:resource'], 2000);
  assert.equal(await client.get('a:resource'), lock.value);
  const pttl = await client.pttl('a:resource');
  assert.ok(pttl > 0 && pttl <= 2000, `pttl ${pttl}`);
  await assert.rejects(redlock.acquire(['a:resource'], 2000), ExecutionError);
  const extended = await lock.extend(10000);
  assert.ok((await client.pttl('a:resource')) > 5000);
  await extended.release();
  assert.equal(await client.get('a:resource'), null);
  // Another owner's value is never deleted by a stale lock.
  const again = await redlock.acquire(['a:resource'], 5000);
  await assert.rejects(lock.release(), ExecutionError);
  assert.equal(await client.get('a:resource'), again.value);
  await again.release();
});

test(`multi-resource locks are all or nothing (${target})`, async () => {
  const redlock = new Redlock([client], { retryCount: 0 });
  const held = await redlock.acquire(['m:2'], 5000);
  await assert.rejects(redlock.acquire(['m:1', 'm:2', 'm:3'], 5000), ExecutionError);
  assert.equal(await client.get('m:1'), null);
  await held.release();
  const all = await redlock.acquire(['m:1', 'm:2', 'm:3'], 5000);
  assert.equal(await client.exists('m:1', 'm:2', 'm:3'), 3);
  await all.release();
  assert.equal(await client.exists('m:1', 'm:2', 'm:3'), 0);
});

test(`using() extends the lock automatically while the routine runs (${target})`, async () => {
  const redlock = new Redlock([client], { retryCount: 0, automaticExtensionThreshold: 200 });
  let sawValue;
  const result = await redlock.using(['u:resource'], 600, async (signal) => {
    // Runs for 3x the lock's duration: only automatic extension keeps it held.
    for (let i = 0; i < 18; i++) {
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(signal.aborted, false, signal.error && signal.error.message);
      sawValue = await client.get('u:resource');
      assert.ok(sawValue, 'the lock lapsed while the routine ran');
    }
    return 'done';
  });
  assert.equal(result, 'done');
  assert.equal(await client.get('u:resource'), null, 'using() releases at the end');
});

function worker(port, rounds) {
  return new Promise((resolve, reject) => {
    const child = fork(new URL('./contender.js', import.meta.url), [String(port), String(rounds)]);
    child.on('message', resolve);
    child.on('error', reject);
    child.on('exit', (code) => { if (code !== 0) reject(new Error(`contender exited ${code}`)); });
  });
}

test(`two processes contending for one lock never overlap (${target})`, async () => {
  await client.del('c:count');
  const results = await Promise.all([worker(server.port, 30), worker(server.port, 30)]);
  assert.deepEqual(results, [30, 30]);
  assert.equal(await client.get('c:count'), '60');
});
