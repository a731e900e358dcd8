// The Node.js runner of the cross-language conformance corpus (conformance/README.md at the repository root).
// Launched by conformance/runners/node.sh with CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN and CONFORMANCE_RESULTS.
// Runs every case of wire/, scenarios/ and guard/ and writes one JSON line per case run. Exits 0 when it ran (even
// with failed cases); non-zero only when the runner itself broke.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { ConnectionLostError, createClient, ReplyError } from "ruvio-client";
import { Decoder, encodeCommand } from "../../dist/esm/resp.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const CORPUS = env("CONFORMANCE_DIR");
const RESULTS = env("CONFORMANCE_RESULTS");
const RUN_ID = randomBytes(5).toString("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

writeFileSync(RESULTS, "");
let counts = { pass: 0, fail: 0 };
function report(id, ok, detail = "") {
  counts[ok ? "pass" : "fail"]++;
  appendFileSync(RESULTS, JSON.stringify(ok ? { case: id, result: "pass" } : { case: id, result: "fail", detail }) + "\n");
}

function jsonFiles(sub) {
  let names;
  try {
    names = readdirSync(path.join(CORPUS, sub));
  } catch {
    return [];
  }
  return names
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => JSON.parse(readFileSync(path.join(CORPUS, sub, f), "utf8")));
}

const show = (v) => JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x));

// ------------------------------------------------------------------ model comparison

function modelEqual(actual, expected) {
  if (!actual || actual.type !== expected.type) return false;
  switch (expected.type) {
    case "nil":
      return true;
    case "double": {
      const a = Number(actual.value.replace(/^inf$/, "Infinity").replace(/^-inf$/, "-Infinity"));
      const e = Number(expected.value.replace(/^inf$/, "Infinity").replace(/^-inf$/, "-Infinity"));
      return Number.isNaN(e) ? Number.isNaN(a) : a === e;
    }
    case "array":
    case "set":
    case "push":
      return actual.items.length === expected.items.length && expected.items.every((e, i) => modelEqual(actual.items[i], e));
    case "map":
      return (
        actual.entries.length === expected.entries.length &&
        expected.entries.every(([k, v], i) => modelEqual(actual.entries[i][0], k) && modelEqual(actual.entries[i][1], v))
      );
    case "error":
      return actual.text === expected.text && (expected.code === undefined || actual.code === expected.code);
    case "bulk":
      return expected.hex !== undefined ? actual.hex === expected.hex : actual.value === expected.value;
    case "verbatim":
      return actual.format === expected.format && actual.value === expected.value;
    default: // simple, integer, boolean, bignumber
      return actual.value === expected.value;
  }
}

// The client's natural values back to the model. The public API folds simple and bulk strings into one JS
// string: such a value is `{type: "string"}` and matches either (the wire vectors check the decoder keeps them apart).
function toModel(v) {
  if (v === null || v === undefined) return { type: "nil" };
  if (v instanceof ReplyError) return { type: "error", text: v.message, code: v.code };
  if (v instanceof Error) throw v;
  if (typeof v === "number") return Number.isInteger(v) ? { type: "integer", value: String(v) } : { type: "double", value: String(v) };
  if (typeof v === "bigint") return { type: "integer", value: v.toString() };
  if (typeof v === "boolean") return { type: "boolean", value: v };
  if (typeof v === "string") return { type: "string", value: v };
  if (Buffer.isBuffer(v)) return { type: "bulk", hex: v.toString("hex") };
  if (Array.isArray(v)) return { type: "array", items: v.map(toModel) };
  if (typeof v === "object" && v.data) return { type: "push", items: v.data.map(toModel) };
  return { type: "map", entries: Object.entries(v).map(([k, x]) => [{ type: "string", value: k }, toModel(x)]) };
}

function valueMatches(actual, expected) {
  if (actual.type === "string" && (expected.type === "simple" || expected.type === "bulk")) return actual.value === expected.value;
  if (expected.type === "array" && actual.type === "array") {
    return actual.items.length === expected.items.length && expected.items.every((e, i) => valueMatches(actual.items[i], e));
  }
  return modelEqual(actual, expected);
}

// ------------------------------------------------------------------ wire vectors

function runDecode(file) {
  for (const c of file.cases) {
    const values = [];
    const d = new Decoder((v) => values.push(v));
    d.model = true;
    let threw = null;
    try {
      d.push(Buffer.from(c.hex, "hex"));
    } catch (e) {
      threw = e;
    }
    if (c.invalid) {
      report(c.id, threw !== null && values.length === 0, `expected a protocol error, got ${threw ? "an error" : show(values)}`);
    } else if (c.incomplete) {
      report(c.id, threw === null && values.length === 0, threw ? `threw ${threw.message}` : `returned ${show(values)}`);
    } else {
      const ok = threw === null && values.length === 1 && modelEqual(values[0], c.expect) && d.buffered() === 0;
      report(c.id, ok, threw ? `threw ${threw.message}` : `decoded ${show(values)}, ${d.buffered()} bytes left`);
    }
  }
}

function runEncode(file) {
  for (const c of file.cases) {
    const args = c.args.map((a) => (typeof a === "string" ? a : Buffer.from(a.hex, "hex")));
    const got = encodeCommand(args).toString("hex");
    report(c.id, got === c.hex, `encoded ${got}`);
  }
}

// ------------------------------------------------------------------ scenario machinery

class Run {
  constructor(id, protocol, addr) {
    this.id = id;
    this.protocol = protocol;
    this.addr = addr;
    this.prefix = `cf:${RUN_ID}:node:${id}:`;
    this.saved = new Map();
    this.conns = new Map();
    this.asyncs = new Map();
    this.guards = new Map();
  }
  conn(name = "a") {
    if (!this.conns.has(name)) {
      const [host, port] = splitAddr(this.addr);
      const c = createClient({ host, port, protocol: this.protocol, commandTimeout: 60_000, connectTimeout: 10_000 });
      c.on("error", () => {});
      this.conns.set(name, c);
    }
    return this.conns.get(name);
  }
  subst(s) {
    return s.replaceAll("{p}", this.prefix).replace(/\{tok:([^}]+)\}/g, (_, name) => {
      if (!this.saved.has(name)) throw new Error(`nothing saved as ${name}`);
      return this.saved.get(name);
    });
  }
  async close() {
    for (const g of this.guards.values()) await g.handle.release().catch(() => {});
    await Promise.all([...this.conns.values()].map((c) => c.close().catch(() => {})));
  }
}

function splitAddr(addr) {
  const i = addr.lastIndexOf(":");
  return [addr.slice(0, i), Number(addr.slice(i + 1))];
}

// A typed call through the client's lock methods; the result mapped back to the model (README section 6).
async function typedCall(c, args) {
  const [cmd, key, ...rest] = args;
  const waitOf = (i) => {
    if (rest[i] === undefined) return undefined;
    if (rest[i].toUpperCase() !== "WAIT") throw new Error(`unexpected option ${rest[i]}`);
    const ms = Number(rest[i + 1]);
    return ms === 0 ? Infinity : ms;
  };
  const tokenModel = (t) => (t === null ? { type: "nil" } : { type: "integer", value: t });
  const bool = (b) => ({ type: "integer", value: b ? "1" : "0" });
  try {
    switch (cmd.toUpperCase()) {
      case "LEASE":
        return tokenModel(await c.lease(key, Number(rest[0]), { waitMs: waitOf(1) }));
      case "SEMAPHORE":
        return tokenModel(await c.semaphore(key, Number(rest[0]), Number(rest[1]), { waitMs: waitOf(2) }));
      case "RENEW":
        return bool(await c.renew(key, rest[0], Number(rest[1])));
      case "RELEASE":
        return bool(await c.release(key, rest[0]));
      case "IFGT": {
        const opts = rest[2] !== undefined && rest[2].toUpperCase() === "PX" ? { px: Number(rest[3]) } : {};
        return bool(await c.ifgt(key, rest[0], rest[1], opts));
      }
      case "LOCKINFO": {
        const info = await c.lockInfo(key);
        return info === null ? { type: "nil" } : { type: "lockinfo-object", info };
      }
      default:
        throw new Error(`no typed method for ${cmd}`);
    }
  } catch (e) {
    if (e instanceof ReplyError) return { type: "error", text: e.message, code: e.code };
    throw e;
  }
}

function intOf(m) {
  return m.type === "integer" ? BigInt(m.value) : null;
}

// Checks the LOCKINFO shape (raw: a map or flat array in field order; typed: the lockInfo object).
function lockinfoMatches(run, m, e) {
  let kind, limit, waiters, holders;
  if (m.type === "lockinfo-object") {
    ({ kind, limit, waiters } = m.info);
    holders = m.info.holders.map((h) => ({ token: BigInt(h.token), remaining: BigInt(h.remainingMs) }));
    limit = BigInt(limit);
    waiters = BigInt(waiters);
  } else {
    let fields;
    if (m.type === "map") fields = m.entries;
    else if (m.type === "array" && m.items.length % 2 === 0) {
      fields = [];
      for (let i = 0; i < m.items.length; i += 2) fields.push([m.items[i], m.items[i + 1]]);
    } else return "not a map or a flat array";
    const names = fields.map(([k]) => k.value);
    if (show(names) !== show(["kind", "limit", "holders", "waiters"])) return `fields ${show(names)}`;
    kind = fields[0][1].value;
    limit = intOf(fields[1][1]);
    waiters = intOf(fields[3][1]);
    if (fields[2][1].type !== "array") return "holders is not an array";
    holders = [];
    for (const h of fields[2][1].items) {
      let hf;
      if (h.type === "map") hf = h.entries;
      else if (h.type === "array") {
        hf = [];
        for (let i = 0; i < h.items.length; i += 2) hf.push([h.items[i], h.items[i + 1]]);
      } else return "a holder is not a map or array";
      if (show(hf.map(([k]) => k.value)) !== show(["token", "remaining_ms"])) return `holder fields ${show(hf.map(([k]) => k.value))}`;
      holders.push({ token: intOf(hf[0][1]), remaining: intOf(hf[1][1]) });
    }
  }
  if (kind !== e.kind) return `kind ${kind}`;
  if (limit !== BigInt(e.limit)) return `limit ${limit}`;
  if (waiters !== BigInt(e.waiters)) return `waiters ${waiters}`;
  if (holders.length !== e.holders.length) return `${holders.length} holders`;
  for (let i = 0; i < holders.length; i++) {
    const want = e.holders[i];
    if (!run.saved.has(want.token)) return `nothing saved as ${want.token}`;
    if (holders[i].token !== BigInt(run.saved.get(want.token))) return `holder ${i} token ${holders[i].token}`;
    const r = holders[i].remaining;
    if (r === null || r < BigInt(want.remaining_ms_min) || r > BigInt(want.remaining_ms_max)) return `holder ${i} remaining_ms ${r}`;
  }
  return null;
}

// Null when `m` matches `e`, else why not.
function mismatch(run, m, e) {
  const n = intOf(m);
  switch (e.match) {
    case "int":
      return n !== null && n === BigInt(e.value) ? null : "not that integer";
    case "int_between":
      return n !== null && n >= BigInt(e.min) && n <= BigInt(e.max) ? null : "integer out of range";
    case "nil":
      return m.type === "nil" ? null : "not nil";
    case "token":
      return n !== null && n > 0n ? null : "not a token";
    case "token_gt":
      return n !== null && n > BigInt(run.saved.get(e.than)) ? null : `not a token above ${e.than}`;
    case "token_eq":
      return n !== null && n === BigInt(run.saved.get(e.name)) ? null : `not ${e.name}`;
    case "simple":
    case "bulk":
      return (m.type === "string" || m.type === e.match) && m.value === e.value ? null : `not ${e.match} ${e.value}`;
    case "error":
      return m.type === "error" && m.text === e.text ? null : "not that error";
    case "value":
      return valueMatches(m, e.value) ? null : "not that value";
    case "any":
      return m.type !== "error" ? null : "an error";
    case "lockinfo":
      return lockinfoMatches(run, m, e);
    default:
      return `unknown matcher ${e.match}`;
  }
}

async function issue(run, step) {
  const c = run.conn(step.conn);
  const args = step.args.map((a) => run.subst(a));
  if (step.typed) return typedCall(c, args);
  try {
    return toModel(await c.sendCommand(args));
  } catch (e) {
    if (e instanceof ReplyError) return toModel(e);
    throw e;
  }
}

function check(run, m, step, expect) {
  const why = mismatch(run, m, expect);
  if (why) return why;
  if (step.save) {
    if (m.type !== "integer") return "save: not an integer";
    run.saved.set(step.save, m.value);
  }
  return null;
}

function withDeadline(p, ms, what) {
  let t;
  return Promise.race([p, new Promise((_, rej) => (t = setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms)))]).finally(() =>
    clearTimeout(t),
  );
}

async function runStep(run, step, server) {
  switch (step.do) {
    case "command": {
      if (step.async) {
        const sent = performance.now();
        const p = issue(run, step).then(
          (m) => ({ m, at: performance.now() }),
          (e) => ({ err: e, at: performance.now() }),
        );
        run.asyncs.set(step.async, { p, sent, conn: step.conn ?? "a" });
        return null;
      }
      if (step.until_ms) {
        const end = performance.now() + Number(step.until_ms);
        let last;
        for (;;) {
          const m = await withDeadline(issue(run, step), 60_000, "command");
          last = mismatch(run, m, step.expect);
          if (!last) return check(run, m, step, step.expect);
          if (performance.now() > end) return `${last} (after ${step.until_ms} ms): ${show(m)}`;
          await sleep(20);
        }
      }
      const m = await withDeadline(issue(run, step), 60_000, "command");
      const why = check(run, m, step, step.expect);
      return why ? `${why}: ${show(m)}` : null;
    }
    case "await": {
      const a = run.asyncs.get(step.id);
      if (!a) return `no async command ${step.id}`;
      const r = await withDeadline(a.p, 30_000, `await ${step.id}`);
      if (step.expect.match === "dropped") {
        if (!r.err) return `expected the connection to be dropped, got ${show(r.m)}`;
        if (!(r.err instanceof ConnectionLostError)) return `expected a connection loss, got ${r.err.message}`;
        // The connection is gone: the client would reconnect by itself, the case wants it dropped.
        run.conns.get(a.conn)?.disconnect();
        run.conns.delete(a.conn);
        return null;
      }
      if (r.err) throw r.err;
      if (step.min_elapsed_ms && r.at - a.sent < Number(step.min_elapsed_ms)) return `answered after ${r.at - a.sent} ms`;
      const why = check(run, r.m, step, step.expect);
      return why ? `${why}: ${show(r.m)}` : null;
    }
    case "sleep": {
      const end = performance.now() + Number(step.ms);
      while (performance.now() < end) await sleep(end - performance.now() + 1);
      return null;
    }
    case "close": {
      const c = run.conns.get(step.conn);
      run.conns.delete(step.conn);
      c?.disconnect();
      return null;
    }
    case "acquire": {
      const c = run.conn("a");
      const key = run.subst(step.key);
      const ttl = Number(step.ttl_ms);
      const sent = performance.now();
      const handle = await c.acquire(key, ttl, step.max_hold_ms ? { maxHoldMs: Number(step.max_hold_ms) } : {});
      if (!handle) return "not granted";
      const g = { handle, sent, ttl, lostAt: null };
      handle.signal.addEventListener("abort", () => (g.lostAt = performance.now()), { once: true });
      run.guards.set(step.guard, g);
      run.saved.set(step.save, handle.token);
      return null;
    }
    case "expect_held": {
      const g = run.guards.get(step.guard);
      return g.handle.lost ? "the guard reported loss" : null;
    }
    case "expect_lost": {
      const g = run.guards.get(step.guard);
      const end = performance.now() + Number(step.within_ms);
      while (g.lostAt === null && performance.now() < end) await sleep(10);
      if (g.lostAt === null) return `no loss signal within ${step.within_ms} ms`;
      if (step.before_deadline && g.lostAt >= g.sent + g.ttl) return `loss signalled ${g.lostAt - g.sent} ms after acquire, TTL ${g.ttl}`;
      return null;
    }
    case "release": {
      const g = run.guards.get(step.guard);
      const ok = await g.handle.release();
      const m = { type: "integer", value: ok ? "1" : "0" };
      const why = mismatch(run, m, step.expect);
      return why ? `${why}: ${show(m)}` : null;
    }
    case "sigstop":
      server.proc.kill("SIGSTOP");
      return null;
    case "sigcont":
      server.proc.kill("SIGCONT");
      return null;
    default:
      return `unknown step ${step.do}`;
  }
}

async function runSteps(run, steps, server) {
  for (let i = 0; i < steps.length; i++) {
    let why;
    try {
      why = await runStep(run, steps[i], server);
    } catch (e) {
      why = `error: ${e && e.message}`;
    }
    if (why) return `step ${i} (${steps[i].do}${steps[i].args ? " " + steps[i].args[0] : ""}): ${why}`;
  }
  return null;
}

// ------------------------------------------------------------------ own servers for guard cases

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function ownServer() {
  const bin = env("RUVIO_BIN");
  const dir = mkdtempSync(path.join(os.tmpdir(), "ruvio-conformance-node-"));
  const port = await freePort();
  const proc = spawn(bin, ["--port", String(port), "--dir", path.join(dir, "data")], { stdio: "ignore" });
  const exited = new Promise((r) => proc.once("exit", r));
  const end = performance.now() + 20_000;
  for (;;) {
    const c = createClient({ port, reconnect: false, protocol: 2, connectTimeout: 500 });
    c.on("error", () => {});
    const ok = await c.ping().then(
      () => true,
      () => false,
    );
    await c.close();
    if (ok) break;
    if (performance.now() > end || proc.exitCode !== null) throw new Error("own server did not start");
    await sleep(50);
  }
  return {
    proc,
    addr: `127.0.0.1:${port}`,
    async stop() {
      proc.kill("SIGCONT");
      proc.kill("SIGKILL");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------ main

async function main() {
  for (const f of jsonFiles("wire")) {
    if (f.format === "wire-decode") runDecode(f);
    else if (f.format === "wire-encode") runEncode(f);
  }
  const addr = env("RUVIO_ADDR");
  // Scenario runs go 8 at a time, guard cases 4 at a time: keys never collide (each run has its own prefix) and
  // own servers are separate processes.
  const scenarioJobs = [];
  for (const f of jsonFiles("scenarios")) {
    if (f.format !== "scenario") continue;
    for (const c of f.cases) {
      for (const p of c.protocols ?? ["2"]) {
        const id = `${c.id}@resp${p}`;
        scenarioJobs.push(async () => {
          const run = new Run(id, Number(p), addr);
          const why = await runSteps(run, c.steps);
          await run.close();
          report(id, why === null, why ?? "");
        });
      }
    }
  }
  await pool(scenarioJobs, 8);
  const guardJobs = [];
  for (const f of jsonFiles("guard")) {
    if (f.format !== "guard") continue;
    for (const c of f.cases) guardJobs.push(() => runGuard(c, addr));
  }
  await pool(guardJobs, 4);
  console.log(`node conformance runner: ${counts.pass} passed, ${counts.fail} failed`);
}

async function pool(jobs, width) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < jobs.length) await jobs[next++]();
    }),
  );
}

async function runGuard(c, addr) {
  let server = null;
  let why;
  try {
    if (c.server === "own") server = await ownServer();
    const run = new Run(c.id, 2, server ? server.addr : addr);
    why = await runSteps(run, c.steps, server);
    if (server) server.proc.kill("SIGCONT");
    await run.close();
  } catch (e) {
    why = `error: ${e.message}`;
  } finally {
    await server?.stop();
  }
  report(c.id, why === null, why ?? "");
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(2);
  },
);
