// Lock-cycle load driver for bench/node_client_locks.sh.
//   node bench/lock_cycles.mjs ruvio PORT CALLERS SECONDS KEYS   -> ruvio-client: LEASE key ttl; RELEASE key token
//   node bench/lock_cycles.mjs redis PORT CALLERS SECONDS KEYS   -> ioredis: SET key token NX PX ttl;
//                                                                   EVALSHA <compare-and-delete> 1 key token
// CALLERS async callers share one client (each client's normal multiplexed use), each running cycles on random keys
// out of KEYS, one cycle at a time. A refused acquire counts as a cycle (no release). Prints one line of
// key=value fields: cycles, refused, seconds, cycles_per_sec, client_cpu_us (this process's CPU per cycle).
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";

const [mode, port, callers = "50", seconds = "10", keys = "10000"] = process.argv.slice(2);
const TTL = 30_000;
const N = Number(keys);

let lease, release, close;
if (mode === "ruvio") {
  const { createClient } = await import("ruvio-client");
  const c = createClient({ port: Number(port) });
  await c.ping();
  lease = (k) => c.lease(k, TTL);
  release = (k, t) => c.release(k, t);
  close = () => c.close();
} else if (mode === "redis") {
  const { default: Redis } = await import("ioredis");
  // ioredis at its fastest: auto-pipelining batches the commands of one tick into one write, as ruvio-client does.
  // IOREDIS_AUTOPIPELINING=0 turns it off (one write per command).
  const auto = process.env.IOREDIS_AUTOPIPELINING !== "0";
  const r = new Redis({ port: Number(port), lazyConnect: true, enableAutoPipelining: auto });
  await r.connect();
  r.defineCommand("unlock", {
    numberOfKeys: 1,
    lua: 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end',
  });
  lease = async (k) => {
    const token = randomBytes(8).toString("hex");
    return (await r.set(k, token, "PX", TTL, "NX")) === "OK" ? token : null;
  };
  release = (k, t) => r.unlock(k, t);
  close = () => r.quit();
} else {
  console.error("usage: lock_cycles.mjs ruvio|redis PORT [CALLERS] [SECONDS] [KEYS]");
  process.exit(2);
}

let counting = false;
let stop = false;
let cycles = 0;
let refused = 0;
async function caller() {
  while (!stop) {
    const k = `bench:lock:${Math.floor(Math.random() * N)}`;
    const t = await lease(k);
    if (t !== null) await release(k, t);
    else if (counting) refused++;
    if (counting) cycles++;
  }
}
const loops = Array.from({ length: Number(callers) }, caller);
await new Promise((r) => setTimeout(r, 1000)); // warm-up
counting = true;
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await new Promise((r) => setTimeout(r, Number(seconds) * 1000));
counting = false;
const elapsed = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
stop = true;
await Promise.all(loops);
await close();
console.log(
  `cycles=${cycles} refused=${refused} seconds=${elapsed.toFixed(2)} cycles_per_sec=${(cycles / elapsed).toFixed(0)} ` +
    `client_cpu_us=${((cpu.user + cpu.system) / cycles).toFixed(2)}`,
);
