// Test helpers: start real ruvio / redis-server / redis-sentinel processes on 127.0.0.1 with a free port and a
// fresh temporary folder. RUVIO_BIN must name the ruvio binary: the tests fail (never skip) without it.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, openSync, closeSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The ruvio binary from $RUVIO_BIN; throws (the test fails) when it is unset or missing. */
export function ruvioBin() {
  const bin = process.env.RUVIO_BIN;
  if (!bin) throw new Error("RUVIO_BIN is not set: point it at the ruvio binary (e.g. target/release/ruvio)");
  if (!existsSync(bin)) throw new Error(`RUVIO_BIN=${bin} does not exist`);
  return bin;
}

/** Fails loudly when a tool the tests need is missing. */
export function requireTool(name) {
  const r = spawnSync("sh", ["-c", `command -v ${name}`]);
  if (r.status !== 0) throw new Error(`${name} is not installed (clients/node/test.sh installs it when run as root)`);
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port });
    const done = (ok) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(500, () => done(false));
    s.once("connect", () => done(true));
    s.once("error", () => done(false));
  });
}

/** Polls `cond` (sync or async) every 20 ms until it is truthy or `timeoutMs` passes (then throws `what`). */
export async function waitFor(cond, timeoutMs = 20_000, what = "condition") {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await cond();
      if (v) return v;
    } catch {
      // retry
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

class Proc {
  constructor(cmd, argsFor, dir) {
    this.cmd = cmd;
    this.argsFor = argsFor;
    this.dir = dir;
    this.host = "127.0.0.1";
    this.proc = null;
  }
  async start(port) {
    this.port = port ?? this.port ?? (await freePort());
    const log = openSync(path.join(this.dir, "server.log"), "a");
    this.proc = spawn(this.cmd, this.argsFor(this.port), { stdio: ["ignore", log, log] });
    closeSync(log);
    const p = this.proc;
    this.exited = new Promise((r) => p.once("exit", r));
    await waitFor(async () => {
      if (p.exitCode !== null) throw new Error(`${this.cmd} exited: ${this.log()}`);
      return canConnect(this.port);
    }, 20_000, `${this.cmd} on port ${this.port}`).catch((e) => {
      throw new Error(`${e.message}\n${this.log()}`);
    });
    return this;
  }
  log() {
    try {
      return readFileSync(path.join(this.dir, "server.log"), "utf8").slice(-3000);
    } catch {
      return "";
    }
  }
  get addr() {
    return `${this.host}:${this.port}`;
  }
  /** SIGSTOP, and wait until the kernel shows the process stopped (state T), so nothing it reads runs after. */
  async pause() {
    this.proc.kill("SIGSTOP");
    await waitFor(() => /^\d+ \(.*\) T/.test(readFileSync(`/proc/${this.proc.pid}/stat`, "utf8")), 10_000, "the process to stop");
  }
  resume() {
    this.proc.kill("SIGCONT");
  }
  async stop() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill("SIGCONT");
    this.proc.kill("SIGKILL");
    await this.exited;
  }
  /** Kills the process and starts it again on the same port and folder. */
  async restart() {
    await this.stop();
    await this.start(this.port);
  }
  async cleanup() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts `$RUVIO_BIN server --port P --dir <fresh> [extra]`. */
export async function startRuvio(extra = []) {
  const bin = ruvioBin();
  const dir = mkdtempSync(path.join(os.tmpdir(), "ruvio-node-client-"));
  const p = new Proc(bin, (port) => ["server", "--port", String(port), "--dir", path.join(dir, "data"), ...extra], dir);
  return p.start();
}

/** Starts redis-server with no persistence. */
export async function startRedis(extra = []) {
  requireTool("redis-server");
  const dir = mkdtempSync(path.join(os.tmpdir(), "ruvio-node-redis-"));
  const p = new Proc("redis-server", (port) => ["--port", String(port), "--dir", dir, "--save", "", "--appendonly", "no", ...extra], dir);
  return p.start();
}

/** Starts redis-sentinel monitoring `name` at `master` (quorum 1, fast failure detection). */
export async function startSentinel(name, master) {
  requireTool("redis-sentinel");
  const dir = mkdtempSync(path.join(os.tmpdir(), "ruvio-node-sentinel-"));
  const conf = path.join(dir, "sentinel.conf");
  const p = new Proc("redis-sentinel", (port) => {
    writeFileSync(
      conf,
      [
        `port ${port}`,
        `dir ${dir}`,
        `sentinel monitor ${name} ${master.host} ${master.port} 1`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 5000`,
        `sentinel parallel-syncs ${name} 1`,
        "",
      ].join("\n"),
    );
    return [conf];
  }, dir);
  return p.start();
}
