// ioredis's `sentinels` option, unchanged, against three `ruvio coordinator`s watching a Ruvio primary and two
// replicas (LIBRARY_TARGET=ruvio), and the same file against three redis-sentinels watching redis-server
// (LIBRARY_TARGET=redis), which proves the expectations are ioredis's. ioredis finds the primary through the
// sentinels, and after kill -9 of the primary it finds the new one by itself: no Ruvio-specific code.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import Redis from 'ioredis';
import { target } from './server.js';

const procs = [];
const dir = mkdtempSync(join(tmpdir(), 'ruvio-node-sentinel-'));

after(() => {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

function run(cmd, args) {
  const p = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'ignore'] });
  procs.push(p);
  return p;
}

async function waitFor(what, f, limitMs = 60000) {
  const deadline = Date.now() + limitMs;
  for (;;) {
    try {
      if (await f()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// One command on a short-lived plain connection.
async function ask(port, ...args) {
  const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => {}); // refused while a process starts: the caller retries
  try {
    await c.connect();
    return await c.call(...args);
  } finally {
    c.disconnect();
  }
}

const COORD_PASS = 'test-coordinator-secret';

function startNode(port, primary) {
  const d = join(dir, `node-${port}`);
  mkdirSync(d);
  if (target === 'redis') {
    const args = ['--port', String(port), '--dir', d, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always'];
    if (primary) args.push('--replicaof', '127.0.0.1', String(primary));
    return run('redis-server', args);
  }
  const bin = process.env.RUVIO_BIN;
  if (!bin || !existsSync(bin)) throw new Error(`RUVIO_BIN must name the ruvio binary (got ${bin})`);
  // The nodes enable the built-in `coordinator` user the coordinators log in as (coordination commands).
  const args = ['--port', String(port), '--dir', d, '--appendonly', 'yes', '--appendfsync', 'always', '--coordinator-pass', COORD_PASS];
  if (primary) args.push('--replicaof', `127.0.0.1 ${primary}`);
  return run(bin, args);
}

function startSentinel(port, peers, primary) {
  const d = join(dir, `sentinel-${port}`);
  mkdirSync(d);
  const conf = join(d, 'sentinel.conf');
  const common = [
    `port ${port}`,
    'bind 127.0.0.1',
    `dir ${d}`,
    `sentinel monitor mymaster 127.0.0.1 ${primary} 2`,
    'sentinel down-after-milliseconds mymaster 1000',
    'sentinel failover-timeout mymaster 10000',
  ];
  if (target === 'redis') {
    writeFileSync(conf, common.join('\n') + '\n');
    return run('redis-sentinel', [conf]);
  }
  common.push(`coordinator-peers ${peers.map((p) => `127.0.0.1:${p}`).join(' ')}`);
  common.push('sentinel durability-replicas mymaster 1');
  common.push('sentinel auth-user mymaster coordinator', `sentinel auth-pass mymaster ${COORD_PASS}`);
  common.push('sentinel sentinel-user coordinators', 'sentinel sentinel-pass test-peer-secret');
  writeFileSync(conf, common.join('\n') + '\n');
  return run(process.env.RUVIO_BIN, ['coordinator', '--config', conf]);
}

test(`ioredis sentinels option finds the primary and follows a kill -9 failover (${target})`, { timeout: 150000 }, async () => {
  const nodes = [await freePort(), await freePort(), await freePort()];
  const primaryProc = startNode(nodes[0]);
  await waitFor('primary up', async () => (await ask(nodes[0], 'PING')) === 'PONG');
  for (const p of nodes.slice(1)) startNode(p, nodes[0]);
  for (const p of nodes.slice(1)) {
    await waitFor(`replica ${p} linked`, async () => /master_link_status:up/.test(await ask(p, 'INFO', 'replication')));
  }
  const sentinels = [await freePort(), await freePort(), await freePort()];
  for (const s of sentinels) startSentinel(s, sentinels, nodes[0]);
  // Every sentinel knows both replicas (and, for redis-sentinel, the other sentinels).
  await waitFor('sentinels ready', async () => {
    for (const s of sentinels) {
      const m = await ask(s, 'SENTINEL', 'MASTER', 'mymaster');
      const f = Object.fromEntries(m.reduce((acc, v, i) => (i % 2 ? acc : [...acc, [v, m[i + 1]]]), []));
      if (f['num-slaves'] !== '2' || f['num-other-sentinels'] !== '2') return false;
      if (target === 'ruvio') {
        const set = (f['durability-set'] || '').split(',').filter(Boolean);
        if (set.length !== 2) return false;
      }
    }
    return true;
  });

  const redis = new Redis({
    sentinels: sentinels.map((port) => ({ host: '127.0.0.1', port })),
    name: 'mymaster',
    sentinelRetryStrategy: () => 100,
  });
  const errors = [];
  redis.on('error', (e) => errors.push(e.message)); // expected while the primary is down; printed on failure
  try {
    await redis.set('before', '1');
    assert.equal(await redis.get('before'), '1');
    assert.equal(Number(await redis.config('GET', 'port').then((r) => r[1])), nodes[0]);

    primaryProc.kill('SIGKILL');
    // ioredis reconnects through the sentinels by itself; retry the write until it lands on the new primary.
    let port;
    await waitFor('a write accepted by a new primary', async () => {
      await redis.set('after', '2');
      port = Number((await redis.config('GET', 'port'))[1]);
      return port !== nodes[0];
    });
    assert.ok(nodes.slice(1).includes(port), `the new primary ${port} is one of the replicas`);
    const addr = await ask(sentinels[0], 'SENTINEL', 'get-master-addr-by-name', 'mymaster');
    assert.equal(Number(addr[1]), port, 'ioredis talks to the primary the sentinels name');
    assert.equal(await redis.get('before'), '1', 'the write made before the failover is there');
    assert.equal(await redis.get('after'), '2');
    const role = await redis.call('ROLE');
    assert.equal(role[0], 'master');
  } catch (e) {
    console.error(`ioredis errors seen: ${errors.slice(-5).join(' | ')}`);
    throw e;
  } finally {
    redis.disconnect();
  }
});
