// Starts the server under test on a free 127.0.0.1 port in a fresh temp directory.
//   RUVIO_TEST_TARGET=redis -> redis-server --port P --dir TMP --save '' --appendonly no [extra]
//   otherwise               -> $RUVIO_BIN server --port P --dir TMP [extra]
//                              (RUVIO_BIN defaults to <repo>/target/release/ruvio)
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..", "..");
export const target = (process.env.RUVIO_TEST_TARGET || "ruvio").toLowerCase();

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function pingOnce(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: "127.0.0.1", port });
    let data = "";
    const done = (ok) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.on("error", () => done(false));
    sock.on("connect", () => sock.write("*1\r\n$4\r\nPING\r\n"));
    sock.on("data", (d) => {
      data += d.toString();
      if (data.includes("\r\n")) done(data.startsWith("+PONG") || data.startsWith("-NOAUTH"));
    });
    sock.on("close", () => done(false));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function startServer(extraArgs = []) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "ruvio-compat-node-"));
  const logPath = path.join(dir, "server.log");
  let lastLog = "";
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    let cmd;
    let args;
    if (target === "redis") {
      cmd = "redis-server";
      args = ["--port", String(port), "--dir", dir, "--save", "", "--appendonly", "no", ...extraArgs];
    } else {
      cmd = process.env.RUVIO_BIN || path.join(repoRoot, "target", "release", "ruvio");
      if (!existsSync(cmd)) {
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`ruvio binary not found: ${cmd} (cargo build --release or set RUVIO_BIN)`);
      }
      args = ["server", "--port", String(port), "--dir", dir, ...extraArgs];
    }
    const log = openSync(logPath, "a");
    const child = spawn(cmd, args, { cwd: dir, stdio: ["ignore", log, log] });
    closeSync(log);
    let exited = false;
    const killOnExit = () => child.kill("SIGKILL"); // never leave a server behind
    process.once("exit", killOnExit);
    child.once("exit", () => {
      exited = true;
      process.removeListener("exit", killOnExit);
    });
    child.once("error", () => {
      exited = true;
    });
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !exited) {
      if (await pingOnce(port)) {
        return {
          port,
          dir,
          child,
          async stop() {
            if (child.exitCode === null && child.signalCode === null) {
              const gone = new Promise((r) => child.once("exit", r));
              child.kill("SIGTERM");
              const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
              await gone;
              clearTimeout(timer);
            }
            rmSync(dir, { recursive: true, force: true });
          },
        };
      }
      await sleep(50);
    }
    try {
      lastLog = readFileSync(logPath, "utf8").slice(-4000);
    } catch {
      lastLog = "";
    }
    if (!exited) {
      child.kill("SIGKILL");
      await new Promise((r) => child.once("exit", r));
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`server did not become ready\n${lastLog}`);
}
