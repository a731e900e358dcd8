// Starts the server under test on 127.0.0.1 with a free port and a fresh data folder:
// LIBRARY_TARGET=redis -> redis-server; otherwise $RUVIO_BIN (required: a missing binary fails loudly).
import { spawn } from 'node:child_process';
import { mkdtempSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';

export const target = (process.env.LIBRARY_TARGET || 'ruvio').toLowerCase();

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

function pingOnce(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.setTimeout(500);
    sock.on('connect', () => sock.write('*1\r\n$4\r\nPING\r\n'));
    sock.on('data', (d) => { sock.destroy(); resolve(d.toString().startsWith('+PONG')); });
    sock.on('error', () => resolve(false));
    sock.on('timeout', () => { sock.destroy(); resolve(false); });
  });
}

export async function startServer() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'ruvio-node-lib-'));
  let cmd;
  let args;
  if (target === 'redis') {
    cmd = 'redis-server';
    args = ['--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no'];
  } else {
    cmd = process.env.RUVIO_BIN;
    if (!cmd || !existsSync(cmd)) {
      throw new Error(`RUVIO_BIN must name the ruvio binary (got ${cmd})`);
    }
    args = ['--port', String(port), '--dir', dir];
  }
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const deadline = Date.now() + 15000;
  while (!(await pingOnce(port))) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`${cmd} did not start on port ${port}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    async stop() {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
