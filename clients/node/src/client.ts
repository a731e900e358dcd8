import "./dispose.js";
import { EventEmitter } from "node:events";
import * as net from "node:net";
import * as tls from "node:tls";
import {
  ConnectionError,
  ConnectionLostError,
  LockNotAcquiredError,
  ReplyError,
  RuvioError,
  TimeoutError,
} from "./errors.js";
import { acquireLock, type AcquireOptions, type LockHandle } from "./lock.js";
import { resolveOptions, type Address, type ClientOptions, type ResolvedOptions } from "./options.js";
import { Decoder, encodeCommand, Push, type Arg, type RespValue } from "./resp.js";

/** A fencing token: a positive 64-bit integer carried as a decimal string. Methods also accept a `bigint`. */
export type Token = string;

/** What LOCKINFO describes. Tokens are decimal strings. */
export interface LockInfo {
  kind: "lease" | "semaphore";
  limit: number;
  holders: { token: Token; remainingMs: number }[];
  waiters: number;
}

/** One lock as `LOCKS` lists it (tokens as decimal strings, like every token of this client). */
export interface ListedLock {
  key: string;
  kind: "lease" | "semaphore";
  limit: number;
  holders: {
    token: Token;
    remainingMs: number;
    /** When it was granted, Unix ms. */
    grantedMs: number;
    heldMs: number;
    /** The client it was granted to (`null` when the server did not grant it since it started). */
    clientId: number | null;
    clientName: string | null;
    clientAddr: string | null;
  }[];
  waiters: number;
}

/** Per-call options of {@link RuvioClient.sendCommand}. */
export interface CommandOptions {
  /** Milliseconds for this command instead of the client's `commandTimeout` (0: none). */
  timeout?: number;
}

type SubKind = "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe";

interface Pending {
  args: Arg[];
  resolve: (v: RespValue) => void;
  reject: (e: Error) => void;
  timer?: NodeJS.Timeout;
  sent: boolean;
  done: boolean;
  /** Confirmations still expected for (P)(UN)SUBSCRIBE. */
  expect: number;
  subKind?: SubKind;
  lastReply?: RespValue;
  /** The timer only bounds the wait for a connection (commandTimeout 0): cleared once written. */
  sendOnly?: boolean;
}

type State = "idle" | "connecting" | "ready" | "closing" | "closed";

/** Replies to the commands of a pipeline: each element is the reply, or the Error the command got. */
export type PipelineResult = (RespValue | Error)[];

/** What {@link Pipeline} and {@link Transaction} share: adding commands. */
export abstract class Batch {
  protected readonly cmds: Arg[][] = [];
  constructor(protected readonly client: RuvioClient) {}
  /** Adds any command: `p.call('SET', 'k', 'v')`. */
  call(...args: Arg[]): this {
    this.cmds.push(args);
    return this;
  }
  /** Adds `GET key`. */
  get(key: Arg): this {
    return this.call("GET", key);
  }
  /** Adds `SET key value [...options]`. */
  set(key: Arg, value: Arg, ...options: Arg[]): this {
    return this.call("SET", key, value, ...options);
  }
  /** Adds `DEL key...`. */
  del(...keys: Arg[]): this {
    return this.call("DEL", ...keys);
  }
  /** Adds `INCR key`. */
  incr(key: Arg): this {
    return this.call("INCR", key);
  }
  /** Number of commands added so far. */
  get length(): number {
    return this.cmds.length;
  }
}

/** Commands sent together in one write, without waiting for each other (not atomic: see {@link Transaction}). */
export class Pipeline extends Batch {
  /** Sends every command; resolves with one entry per command: its reply or its Error (never rejects). */
  async exec(): Promise<PipelineResult> {
    const settled = await Promise.allSettled(this.cmds.map((c) => this.client.sendCommand(c)));
    return settled.map((s) => (s.status === "fulfilled" ? s.value : (s.reason as Error)));
  }
}

/**
 * MULTI ... EXEC: the commands are written together, so no other command of this client can come between them.
 * `exec()` resolves with the array of replies (a command's runtime error is a {@link ReplyError} element), or with
 * `null` when a WATCHed key changed; it rejects when the transaction was refused (EXECABORT) or its fate is unknown.
 */
export class Transaction extends Batch {
  /** Sends MULTI, the commands and EXEC together; see the class description for the result. */
  async exec(): Promise<PipelineResult | null> {
    return this.client._execTransaction(this.cmds);
  }
}

const SUB_KINDS = new Set(["subscribe", "unsubscribe", "psubscribe", "punsubscribe"]);

function toToken(v: RespValue): Token | null {
  if (v === null) return null;
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  throw new RuvioError(`unexpected reply for a token: ${String(v)}`);
}

function tokenArg(token: string | bigint): string {
  if (typeof token === "bigint") return token.toString();
  if (typeof token === "number") {
    if (!Number.isSafeInteger(token)) throw new TypeError("tokens above 2^53 must be strings or bigints");
    return String(token);
  }
  if (typeof token !== "string") throw new TypeError("a token is a decimal string or a bigint");
  return token;
}

function defaultBackoff(attempt: number): number {
  return Math.min(attempt * 50, 2000);
}

/**
 * A Ruvio (or Redis) client: one multiplexed connection, safe for any number of concurrent callers (commands are
 * pipelined on the connection and answered in order). Create it with {@link createClient}; call commands right away
 * (they wait in a queue until the connection is ready); end it with {@link RuvioClient.close} or `await using`.
 *
 * Events: `'connect'` (socket open), `'ready'` (handshake done), `'reconnecting'` ({delay, attempt}), `'end'`
 * (closed for good), `'error'` (only emitted when a listener is attached: an unobserved error is never thrown),
 * `'message'` (channel, message), `'pmessage'` (pattern, channel, message), `'push'` (other RESP3 pushes).
 *
 * Retries: a command is written at most once. A command whose connection drops after it was written is rejected
 * with {@link ConnectionLostError} (its fate is unknown) and never re-sent: LEASE and SEMAPHORE in particular must
 * not be retried blindly (the grant may have happened). RENEW and RELEASE carry the token and are safe to retry;
 * the lock helper does that. Commands not yet written when the connection drops are sent after reconnecting.
 */
export class RuvioClient extends EventEmitter implements AsyncDisposable {
  /** The options in force (defaults applied). */
  readonly options: ResolvedOptions;
  private state: State = "idle";
  private socket: net.Socket | null = null;
  private readonly decoder: Decoder;
  private offline: Pending[] = [];
  private inflight: Pending[] = [];
  private inflightHead = 0;
  private writeQueue: Buffer[] = [];
  private flushScheduled = false;
  private connectPromise: Promise<void> | null = null;
  private attempt = 0;
  private epoch = 0;
  private watchEpoch = -1;
  private protocolInUse: 2 | 3 = 2;
  private subCount = 0;
  private readonly channels = new Set<string>();
  private readonly patterns = new Set<string>();
  private readonly channelListeners = new Map<string, Set<(message: string, channel: string) => void>>();
  private readonly patternListeners = new Map<string, Set<(message: string, channel: string, pattern: string) => void>>();
  private sentinelWatcher: RuvioClient | null = null;
  private currentAddress: Address | null = null;
  private drainWaiters: (() => void)[] = [];
  private closing: Promise<void> | null = null;
  private idleWaiters: RuvioClient[] = [];
  private readonly busyWaiters = new Set<RuvioClient>();

  /** Prefer {@link createClient}. */
  constructor(options: ClientOptions = {}) {
    super();
    this.options = resolveOptions(options);
    this.decoder = new Decoder((v) => this.onReply(v));
    if (!this.options.lazyConnect) void this.connect().catch(() => {});
  }

  /** The RESP version of the current connection (3, or 2 after a fallback). */
  get protocol(): 2 | 3 {
    return this.protocolInUse;
  }

  /** True once the handshake of the current connection has finished. */
  get isReady(): boolean {
    return this.state === "ready";
  }

  /** True once the client is closed (or closing): it sends nothing more. */
  get isClosed(): boolean {
    return this.state === "closed" || this.state === "closing";
  }

  /** The address of the server this client is connected (or connecting) to. */
  get address(): Address | null {
    return this.currentAddress;
  }

  /**
   * Connects (once; later calls return the same promise). Not needed: commands connect by themselves. Resolves when
   * ready; rejects when the first attempt fails (the client keeps retrying unless `reconnect` is false).
   */
  connect(): Promise<void> {
    if (this.state === "closed" || this.state === "closing") return Promise.reject(new ConnectionError("client is closed"));
    if (this.state === "ready") return Promise.resolve();
    if (!this.connectPromise) {
      this.state = "connecting";
      this.connectPromise = this.connectLoop();
    }
    return this.connectPromise;
  }

  // ---------------------------------------------------------------- connection

  private emitError(e: Error): void {
    if (this.listenerCount("error") > 0) this.emit("error", e);
  }

  private async connectLoop(): Promise<void> {
    let firstError: Error | null = null;
    let reportedFirst = false;
    let resolveFirst!: () => void;
    let rejectFirst!: (e: Error) => void;
    const first = new Promise<void>((res, rej) => {
      resolveFirst = res;
      rejectFirst = rej;
    });
    first.catch(() => {});
    const loop = async () => {
      while (this.state === "connecting") {
        try {
          await this.openOnce();
          this.attempt = 0;
          this.connectPromise = null;
          if (!reportedFirst) {
            reportedFirst = true;
            resolveFirst();
          }
          return;
        } catch (e) {
          const err = e as Error;
          this.teardownSocket(err);
          if ((this.state as State) !== "connecting") break;
          this.emitError(err);
          if (err instanceof ReplyError) this.failOffline(err);
          if (!reportedFirst) {
            reportedFirst = true;
            firstError = err;
            rejectFirst(err);
          }
          this.attempt++;
          const r = this.options.reconnect;
          const delay = r === false ? null : r === true ? defaultBackoff(this.attempt) : r(this.attempt);
          if (delay === null || delay === undefined) {
            this.failOffline(new ConnectionError(`cannot connect: ${err.message}`, false, { cause: err }));
            this.finishClose();
            break;
          }
          this.emit("reconnecting", { delay, attempt: this.attempt });
          await new Promise((r2) => setTimeout(r2, delay));
        }
      }
      this.connectPromise = null;
      if (!reportedFirst) rejectFirst(firstError ?? new ConnectionError("client is closed"));
    };
    void loop();
    return first;
  }

  private async discover(): Promise<Address> {
    const sentinels = this.options.sentinels!;
    const errors: string[] = [];
    for (let i = 0; i < sentinels.length; i++) {
      const s = sentinels[i];
      const probe = new RuvioClient({
        host: s.host,
        port: s.port,
        protocol: 2,
        reconnect: false,
        connectTimeout: this.options.connectTimeout,
        commandTimeout: this.options.connectTimeout,
        username: this.options.sentinelUsername,
        password: this.options.sentinelPassword,
        tls: this.options.tls,
      });
      try {
        const reply = await probe.sendCommand(["SENTINEL", "get-master-addr-by-name", this.options.serviceName!]);
        if (Array.isArray(reply) && reply.length >= 2) {
          // Ask the one that answered first next time.
          if (i > 0) sentinels.unshift(...sentinels.splice(i, 1));
          return { host: String(reply[0]), port: Number(reply[1]) };
        }
        errors.push(`${s.host}:${s.port} does not know ${this.options.serviceName}`);
      } catch (e) {
        errors.push(`${s.host}:${s.port}: ${(e as Error).message}`);
      } finally {
        probe.disconnect();
      }
    }
    throw new ConnectionError(`no coordinator gave the primary of ${this.options.serviceName}: ${errors.join("; ")}`);
  }

  private watchSentinels(): void {
    if (this.sentinelWatcher || !this.options.sentinels?.length) return;
    const s = this.options.sentinels[0];
    const w = new RuvioClient({
      host: s.host,
      port: s.port,
      protocol: 2,
      connectTimeout: this.options.connectTimeout,
      commandTimeout: 0,
      username: this.options.sentinelUsername,
      password: this.options.sentinelPassword,
      tls: this.options.tls,
    });
    this.sentinelWatcher = w;
    w.on("error", () => {});
    w.on("message", (channel: string, message: string) => {
      if (channel !== "+switch-master") return;
      const [name, , , host, port] = message.split(" ");
      if (name !== this.options.serviceName) return;
      const cur = this.currentAddress;
      if (cur && cur.host === host && cur.port === Number(port) && this.state === "ready") return;
      this.emit("switch-master", { host, port: Number(port) });
      this.rediscover(new ConnectionLostError(`failover: primary moved to ${host}:${port}`));
    });
    void w.subscribe("+switch-master").catch(() => {});
  }

  /** Drops the current connection so that the next one asks the coordinators again. */
  private rediscover(reason: Error): void {
    if (this.state !== "ready") return;
    this.socket?.destroy(reason);
  }

  private openSocket(addr: Address): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const o = this.options;
      const sock: net.Socket = o.tls
        ? tls.connect({ host: addr.host, port: addr.port, servername: net.isIP(addr.host) ? undefined : addr.host, ...(o.tls === true ? {} : o.tls) })
        : net.connect({ host: addr.host, port: addr.port });
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new ConnectionError(`connect to ${addr.host}:${addr.port} timed out after ${o.connectTimeout} ms`));
      }, o.connectTimeout);
      const onError = (e: Error) => {
        clearTimeout(timer);
        sock.destroy();
        reject(new ConnectionError(`connect to ${addr.host}:${addr.port} failed: ${e.message}`, false, { cause: e }));
      };
      sock.once("error", onError);
      sock.once(o.tls ? "secureConnect" : "connect", () => {
        clearTimeout(timer);
        sock.off("error", onError);
        resolve(sock);
      });
    });
  }

  private async openOnce(): Promise<void> {
    const addr = this.options.sentinels?.length ? await this.discover() : { host: this.options.host, port: this.options.port };
    this.currentAddress = addr;
    const sock = await this.openSocket(addr);
    if (this.state !== "connecting") {
      sock.destroy();
      throw new ConnectionError("client is closed");
    }
    sock.setNoDelay(true);
    if (this.options.keepAlive > 0) sock.setKeepAlive(true, this.options.keepAlive);
    this.decoder.reset();
    this.socket = sock;
    sock.on("data", (chunk: Buffer) => {
      try {
        this.decoder.push(chunk);
      } catch (e) {
        sock.destroy(e as Error);
      }
    });
    sock.on("error", (e: Error) => this.emitError(e));
    sock.on("close", () => this.onSocketClose(sock));
    this.emit("connect");
    const deadline = setTimeout(
      () => sock.destroy(new ConnectionError(`handshake with ${addr.host}:${addr.port} timed out`)),
      this.options.connectTimeout,
    );
    try {
      await this.handshake();
    } finally {
      clearTimeout(deadline);
    }
    if (this.socket !== sock || sock.destroyed) throw new ConnectionError("connection closed during the handshake");
    if (this.state !== "connecting") throw new ConnectionError("client is closed");
    this.epoch++;
    this.state = "ready";
    const queued = this.offline;
    this.offline = [];
    for (const p of queued) if (!p.done) this.write(p);
    this.emit("ready");
    if (this.options.sentinels?.length) this.watchSentinels();
  }

  /** Writes a command on the current socket now, bypassing the offline queue (handshake use). */
  private direct(args: Arg[]): Promise<RespValue> {
    return new Promise((resolve, reject) => {
      const p: Pending = { args, resolve, reject, sent: false, done: false, expect: 1 };
      this.write(p);
    });
  }

  private async handshake(): Promise<void> {
    const o = this.options;
    let proto: 2 | 3 = 2;
    let authed = false;
    let named = false;
    if (o.protocol === 3) {
      const hello: Arg[] = ["HELLO", "3"];
      if (o.password !== undefined) hello.push("AUTH", o.username ?? "default", o.password);
      if (o.name) hello.push("SETNAME", o.name);
      try {
        await this.direct(hello);
        proto = 3;
        authed = true;
        named = true;
      } catch (e) {
        // Servers without RESP3 answer NOPROTO or "unknown command": fall back to RESP2. Anything else (a wrong
        // password, for instance) is the real answer.
        if (!(e instanceof ReplyError) || !(e.code === "NOPROTO" || /unknown command/i.test(e.message))) throw e;
      }
    }
    this.protocolInUse = proto;
    if (!authed && o.password !== undefined) {
      await this.direct(o.username ? ["AUTH", o.username, o.password] : ["AUTH", o.password]);
    }
    if (!named && o.name) await this.direct(["CLIENT", "SETNAME", o.name]);
    if (o.db) await this.direct(["SELECT", o.db]);
    if (o.durability) await this.direct(["CLIENT", "DURABILITY", "REPLICAS", o.durability.replicas]);
    if (o.sentinels?.length) {
      try {
        const role = await this.direct(["ROLE"]);
        if (Array.isArray(role) && role[0] !== "master") {
          throw new ConnectionError(`${this.currentAddress?.host}:${this.currentAddress?.port} is a ${String(role[0])}, not the primary`);
        }
      } catch (e) {
        // A server without ROLE cannot confirm; the coordinator's answer stands.
        if (!(e instanceof ReplyError && /unknown command/i.test(e.message))) throw e;
      }
    }
    this.subCount = 0;
    if (this.channels.size) await this.directSub("subscribe", [...this.channels]);
    if (this.patterns.size) await this.directSub("psubscribe", [...this.patterns]);
  }

  private directSub(kind: SubKind, names: string[]): Promise<RespValue> {
    return new Promise((resolve, reject) => {
      const p: Pending = { args: [kind.toUpperCase(), ...names], resolve, reject, sent: false, done: false, expect: names.length, subKind: kind };
      this.write(p);
    });
  }

  private onSocketClose(sock: net.Socket): void {
    if (this.socket !== sock) return;
    this.teardownSocket(new ConnectionLostError("connection lost before the reply; the command may or may not have run"));
    if (this.state === "ready" && this.options.reconnect === false) {
      this.finishClose();
    } else if (this.state === "ready") {
      this.state = "connecting";
      this.emit("reconnecting", { delay: 0, attempt: 0 });
      this.connectPromise = this.connectLoop();
      this.connectPromise.catch(() => {});
    } else if (this.state === "closing") {
      this.finishClose();
    }
  }

  /** Forgets the socket; every written command without a reply is rejected with `err` (never re-sent). */
  private teardownSocket(err: Error): void {
    const sock = this.socket;
    this.socket = null;
    this.writeQueue = [];
    if (sock && !sock.destroyed) sock.destroy();
    const lost = this.inflight.slice(this.inflightHead);
    this.inflight = [];
    this.inflightHead = 0;
    for (const p of lost) {
      if (p.done) continue;
      const e = err instanceof ConnectionLostError || !p.sent ? err : new ConnectionLostError(err.message, { cause: err });
      this.settle(p, e);
    }
    this.notifyDrained();
  }

  private failOffline(err: Error): void {
    const q = this.offline;
    this.offline = [];
    for (const p of q) this.settle(p, err);
  }

  private finishClose(): void {
    if (this.state === "closed") return;
    this.state = "closed";
    this.failOffline(new ConnectionError("client is closed"));
    this.sentinelWatcher?.disconnect();
    this.sentinelWatcher = null;
    this.emit("end");
  }

  // ---------------------------------------------------------------- sending and receiving

  private settle(p: Pending, result: RespValue | Error): void {
    if (p.done) return;
    p.done = true;
    if (p.timer) clearTimeout(p.timer);
    if (result instanceof Error) {
      if (result instanceof ReplyError && !result.command) result.command = p.args.map(String);
      p.reject(result);
    } else p.resolve(result);
  }

  private write(p: Pending): void {
    p.sent = true;
    if (p.sendOnly && p.timer) clearTimeout(p.timer);
    this.inflight.push(p);
    this.writeQueue.push(encodeCommand(p.args));
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      process.nextTick(() => this.flush());
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    const q = this.writeQueue;
    if (!q.length) return;
    this.writeQueue = [];
    const sock = this.socket;
    if (!sock || sock.destroyed) return;
    sock.write(q.length === 1 ? q[0] : Buffer.concat(q));
  }

  private enqueue(p: Pending, timeout: number): void {
    if (this.state === "closed" || this.state === "closing") {
      this.settle(p, new ConnectionError("client is closed"));
      return;
    }
    const limit = timeout > 0 ? timeout : this.state === "ready" ? 0 : this.options.connectTimeout;
    p.sendOnly = timeout <= 0;
    if (limit > 0) {
      p.timer = setTimeout(() => {
        if (p.done) return;
        if (!p.sent) {
          const i = this.offline.indexOf(p);
          if (i >= 0) this.offline.splice(i, 1);
          this.settle(p, new TimeoutError(`${String(p.args[0])} not sent within ${limit} ms: the server is not reachable`, false));
        } else {
          // The reply may still come; it is then dropped. The command may or may not have run.
          this.settle(p, new TimeoutError(`${String(p.args[0])} got no reply within ${limit} ms; it may or may not have run`, true));
        }
      }, limit);
    }
    if (this.state === "ready") this.write(p);
    else {
      this.offline.push(p);
      if (this.state === "idle") void this.connect().catch(() => {});
    }
  }

  private onReply(v: RespValue): void {
    if (v instanceof Push) {
      this.onPush(v.data);
      return;
    }
    if (Array.isArray(v) && v.length > 0 && typeof v[0] === "string") {
      const kind = v[0];
      if (this.subCount > 0 && (kind === "message" || kind === "pmessage")) {
        this.onPush(v);
        return;
      }
      if (SUB_KINDS.has(kind) && this.head()?.subKind) {
        this.onPush(v);
        return;
      }
    }
    const p = this.shift();
    if (!p) return;
    if (v instanceof ReplyError && v.code === "READONLY" && this.options.sentinels?.length) {
      // The node we talk to is no longer the primary: find the new one.
      setImmediate(() => this.rediscover(new ConnectionLostError("the server answered READONLY: rediscovering the primary")));
    }
    this.settle(p, v);
  }

  private head(): Pending | undefined {
    return this.inflight[this.inflightHead];
  }

  private shift(): Pending | undefined {
    if (this.inflightHead >= this.inflight.length) return undefined;
    const p = this.inflight[this.inflightHead++];
    if (this.inflightHead > 1024 && this.inflightHead * 2 > this.inflight.length) {
      this.inflight = this.inflight.slice(this.inflightHead);
      this.inflightHead = 0;
    }
    if (this.inflightHead >= this.inflight.length) {
      this.inflight = [];
      this.inflightHead = 0;
      this.notifyDrained();
    }
    return p;
  }

  private notifyDrained(): void {
    const w = this.drainWaiters;
    this.drainWaiters = [];
    for (const f of w) f();
  }

  private onPush(data: RespValue[]): void {
    const kind = String(data[0]);
    if (kind === "message" || kind === "smessage") {
      const channel = String(data[1]);
      const message = data[2] as string;
      this.emit("message", channel, message);
      for (const f of this.channelListeners.get(channel) ?? []) f(message, channel);
      return;
    }
    if (kind === "pmessage") {
      const [pattern, channel, message] = [String(data[1]), String(data[2]), data[3] as string];
      this.emit("pmessage", pattern, channel, message);
      for (const f of this.patternListeners.get(pattern) ?? []) f(message, channel, pattern);
      return;
    }
    if (SUB_KINDS.has(kind)) {
      if (typeof data[2] === "number") this.subCount = data[2];
      const p = this.head();
      if (p?.subKind) {
        p.lastReply = data[2];
        if (--p.expect <= 0) {
          this.shift();
          this.settle(p, p.lastReply ?? null);
        }
      }
      return;
    }
    this.emit("push", data);
  }

  /**
   * Sends any command and resolves with its reply in this client's types (see {@link RespValue}); rejects with a
   * {@link ReplyError} for an error reply, {@link TimeoutError}, {@link ConnectionLostError} or
   * {@link ConnectionError}.
   *
   * ```js
   * await c.sendCommand(['SET', 'greeting', 'hello', 'EX', 60]); // 'OK'
   * ```
   */
  sendCommand(args: readonly Arg[], opts: CommandOptions = {}): Promise<RespValue> {
    return new Promise((resolve, reject) => {
      const p: Pending = { args: [...args], resolve, reject, sent: false, done: false, expect: 1 };
      this.enqueue(p, opts.timeout ?? this.options.commandTimeout);
    });
  }

  /** Sends any command: `await c.call('HSET', 'h', 'f', 'v')`. Same as `sendCommand([...args])`. */
  call(...args: Arg[]): Promise<RespValue> {
    return this.sendCommand(args);
  }

  // ---------------------------------------------------------------- lock commands

  /**
   * `LEASE key ttlMs [WAIT waitMs]`: takes the single-holder lock. Resolves with the fencing token (a decimal
   * string) when you hold it, `null` when someone else does (or the wait ran out). `waitMs`: wait that long in the
   * server's fair queue (0 or absent: do not wait; `Infinity`: wait without a limit, sent as `WAIT 0`). Never
   * retried by the client.
   */
  async lease(key: string, ttlMs: number, opts: { waitMs?: number } = {}): Promise<Token | null> {
    return toToken(await this.maybeWaiting(["LEASE", key, ttlMs], opts.waitMs));
  }

  /**
   * `SEMAPHORE key limit ttlMs [WAIT waitMs]`: takes one of `limit` slots. Resolves with the slot's token (a decimal
   * string) or `null` when all slots are taken. Never retried by the client.
   */
  async semaphore(key: string, limit: number, ttlMs: number, opts: { waitMs?: number } = {}): Promise<Token | null> {
    return toToken(await this.maybeWaiting(["SEMAPHORE", key, limit, ttlMs], opts.waitMs));
  }

  /**
   * A grant that may wait (`WAIT`) blocks its connection on the server until it is answered, so it runs on a
   * connection of its own, borrowed from a small pool: other commands of this client (the lock helper's renewals
   * above all) are never held up behind it.
   */
  private async maybeWaiting(args: Arg[], waitMs?: number): Promise<RespValue> {
    const full = this.withWait(args, waitMs);
    if (!waitMs) return this.sendCommand(full);
    if (this.isClosed) throw new ConnectionError("client is closed");
    const b = this.idleWaiters.pop() ?? this.duplicate({ lazyConnect: false });
    this.busyWaiters.add(b);
    try {
      return await b.sendCommand(full, this.waitTimeout(waitMs));
    } finally {
      this.busyWaiters.delete(b);
      if (this.isClosed || b.isClosed || this.idleWaiters.length >= 4) void b.close().catch(() => {});
      else this.idleWaiters.push(b);
    }
  }

  /** `RENEW key token ttlMs`: true when `token` still holds `key` and its deadline moved to now + ttlMs. */
  async renew(key: string, token: Token | bigint, ttlMs: number): Promise<boolean> {
    return (await this.sendCommand(["RENEW", key, tokenArg(token), ttlMs])) === 1;
  }

  /** `RELEASE key token`: true when released, false if the token no longer holds the lock. */
  async release(key: string, token: Token | bigint): Promise<boolean> {
    return (await this.sendCommand(["RELEASE", key, tokenArg(token)])) === 1;
  }

  /**
   * `IFGT key token value [PX ms]`: a fenced write. True when written, false when a higher token already wrote
   * `key`.
   */
  async ifgt(key: string, token: Token | bigint, value: Arg, opts: { px?: number } = {}): Promise<boolean> {
    const args: Arg[] = ["IFGT", key, tokenArg(token), value];
    if (opts.px !== undefined) args.push("PX", opts.px);
    return (await this.sendCommand(args)) === 1;
  }

  /** `LOCKINFO key`: the lock's kind, limit, holders (tokens as strings) and waiters; `null` when there is no lock. */
  async lockInfo(key: string): Promise<LockInfo | null> {
    const r = await this.sendCommand(["LOCKINFO", key]);
    if (r === null) return null;
    const m = pairs(r);
    const holders = (m.holders as RespValue[]).map((h) => {
      const hm = pairs(h);
      return { token: String(hm.token), remainingMs: Number(hm.remaining_ms) };
    });
    return { kind: m.kind as "lease" | "semaphore", limit: Number(m.limit), holders, waiters: Number(m.waiters) };
  }

  /**
   * `LOCKS cursor [MATCH pattern] [COUNT n]`: one page of the database's locks, with each holder's token, grant time
   * and client; continue with the returned cursor until it is `"0"` (as SCAN).
   */
  async locks(cursor: string | number = 0, opts: { match?: string; count?: number } = {}): Promise<{ cursor: string; locks: ListedLock[] }> {
    const args: Arg[] = ["LOCKS", String(cursor)];
    if (opts.match !== undefined) args.push("MATCH", opts.match);
    if (opts.count !== undefined) args.push("COUNT", opts.count);
    const [next, page] = (await this.sendCommand(args)) as [RespValue, RespValue[]];
    const opt = (v: RespValue | undefined): string | null => (v === null || v === undefined ? null : String(v));
    const locks = page.map((l) => {
      const m = pairs(l);
      const holders = (m.holders as RespValue[]).map((h) => {
        const hm = pairs(h);
        return {
          token: String(hm.token),
          remainingMs: Number(hm.remaining_ms),
          grantedMs: Number(hm.granted_ms),
          heldMs: Number(hm.held_ms),
          clientId: hm.client_id === null || hm.client_id === undefined ? null : Number(hm.client_id),
          clientName: opt(hm.client_name),
          clientAddr: opt(hm.client_addr),
        };
      });
      return { key: String(m.key), kind: m.kind as "lease" | "semaphore", limit: Number(m.limit), holders, waiters: Number(m.waiters) };
    });
    return { cursor: String(next), locks };
  }

  /** Every lock (matching `opts.match`), iterating `LOCKS` to the end. */
  async *scanLocks(opts: { match?: string; count?: number } = {}): AsyncGenerator<ListedLock> {
    let cursor = "0";
    do {
      const page = await this.locks(cursor, opts);
      yield* page.locks;
      cursor = page.cursor;
    } while (cursor !== "0");
  }

  /**
   * Takes a lock and returns a handle that renews it in the background (at TTL/3), exposes its `token` and an
   * `AbortSignal` that aborts when the lock is lost, and `release()`s it. Resolves `null` when someone else holds
   * it. See {@link AcquireOptions}.
   */
  acquire(key: string, ttlMs: number, opts: AcquireOptions = {}): Promise<LockHandle | null> {
    return acquireLock(this, key, ttlMs, opts);
  }

  /**
   * node-redlock's shape: takes the lock (throws {@link LockNotAcquiredError} when it is held by someone else),
   * runs `routine(signal, handle)` while renewing the lock, aborts `signal` if the lock is lost, and releases the
   * lock when the routine ends. Resolves with the routine's result.
   *
   * ```js
   * await c.using('job:nightly-report', 30_000, async (signal) => {
   *   for (const part of parts) {
   *     if (signal.aborted) throw signal.reason;
   *     await writePart(part);
   *   }
   * });
   * ```
   */
  async using<T>(key: string, ttlMs: number, routine: (signal: AbortSignal, handle: LockHandle) => Promise<T>): Promise<T>;
  async using<T>(
    key: string,
    ttlMs: number,
    opts: AcquireOptions,
    routine: (signal: AbortSignal, handle: LockHandle) => Promise<T>,
  ): Promise<T>;
  async using<T>(
    key: string,
    ttlMs: number,
    a: AcquireOptions | ((signal: AbortSignal, handle: LockHandle) => Promise<T>),
    b?: (signal: AbortSignal, handle: LockHandle) => Promise<T>,
  ): Promise<T> {
    const opts = typeof a === "function" ? {} : a;
    const routine = typeof a === "function" ? a : b!;
    const h = await this.acquire(key, ttlMs, opts);
    if (!h) throw new LockNotAcquiredError(key);
    try {
      return await routine(h.signal, h);
    } finally {
      await h.release().catch((e) => this.emitError(e as Error));
    }
  }

  private withWait(args: Arg[], waitMs?: number): Arg[] {
    if (waitMs === Infinity) args.push("WAIT", 0);
    else if (waitMs !== undefined && waitMs > 0) args.push("WAIT", Math.ceil(waitMs));
    return args;
  }

  private waitTimeout(waitMs?: number): CommandOptions {
    const t = this.options.commandTimeout;
    if (!waitMs || t === 0) return {};
    if (waitMs === Infinity) return { timeout: 0 };
    return { timeout: t + waitMs };
  }

  // ---------------------------------------------------------------- common commands

  /** `PING [message]`. */
  ping(message?: string): Promise<RespValue> {
    return this.sendCommand(message === undefined ? ["PING"] : ["PING", message]);
  }
  /** `GET key`: the value, or null. */
  get(key: Arg): Promise<string | null> {
    return this.sendCommand(["GET", key]) as Promise<string | null>;
  }
  /** `SET key value [...options]` (e.g. `'PX', 1000, 'NX'`): 'OK', or null when NX/XX prevented it. */
  set(key: Arg, value: Arg, ...options: Arg[]): Promise<string | null> {
    return this.sendCommand(["SET", key, value, ...options]) as Promise<string | null>;
  }
  /** `DEL key...`: how many keys were removed. */
  del(...keys: Arg[]): Promise<number> {
    return this.sendCommand(["DEL", ...keys]) as Promise<number>;
  }
  /** `EXISTS key...`. */
  exists(...keys: Arg[]): Promise<number> {
    return this.sendCommand(["EXISTS", ...keys]) as Promise<number>;
  }
  /** `INCR key`. */
  incr(key: Arg): Promise<number> {
    return this.sendCommand(["INCR", key]) as Promise<number>;
  }
  /** `PEXPIRE key ms`: 1 when set. */
  pexpire(key: Arg, ms: number): Promise<number> {
    return this.sendCommand(["PEXPIRE", key, ms]) as Promise<number>;
  }
  /** `PTTL key`. */
  pttl(key: Arg): Promise<number> {
    return this.sendCommand(["PTTL", key]) as Promise<number>;
  }
  /** `PUBLISH channel message`: how many subscribers received it. */
  publish(channel: string, message: Arg): Promise<number> {
    return this.sendCommand(["PUBLISH", channel, message]) as Promise<number>;
  }

  /** A pipeline: commands written together, replies collected in order. */
  pipeline(): Pipeline {
    return new Pipeline(this);
  }

  /** A MULTI/EXEC transaction (see {@link Transaction}). */
  multi(): Transaction {
    return new Transaction(this);
  }

  /**
   * `WATCH key...` on this client's connection. Use it on a client of its own ({@link duplicate}): WATCH state
   * belongs to the connection, and another caller's EXEC on a shared client would clear it. If the connection is
   * lost between WATCH and EXEC, the transaction is rejected instead of running unwatched.
   */
  async watch(...keys: Arg[]): Promise<"OK"> {
    const r = await this.sendCommand(["WATCH", ...keys]);
    // The reply came on the current connection (a lost one rejects instead): its WATCH state is this epoch's.
    this.watchEpoch = this.epoch;
    return r as "OK";
  }

  /** `UNWATCH`. */
  async unwatch(): Promise<"OK"> {
    const r = await this.sendCommand(["UNWATCH"]);
    this.watchEpoch = -1;
    return r as "OK";
  }

  /** @internal */
  async _execTransaction(cmds: Arg[][]): Promise<PipelineResult | null> {
    const watched = this.watchEpoch;
    this.watchEpoch = -1;
    if (watched !== -1 && (watched !== this.epoch || this.state !== "ready")) {
      throw new ConnectionError("the connection was lost after WATCH; the transaction was not sent");
    }
    const multi = this.sendCommand(["MULTI"]);
    const queued = cmds.map((c) => this.sendCommand(c));
    const exec = this.sendCommand(["EXEC"]);
    const settled = await Promise.allSettled([multi, ...queued]);
    try {
      return (await exec) as PipelineResult | null;
    } catch (e) {
      if (e instanceof ReplyError && e.code === "EXECABORT") {
        (e as ReplyError & { errors?: unknown[] }).errors = settled
          .filter((s) => s.status === "rejected")
          .map((s) => (s as PromiseRejectedResult).reason);
      }
      throw e;
    }
  }

  // ---------------------------------------------------------------- pub/sub

  /**
   * `SUBSCRIBE`: messages arrive as `'message'` events (channel, message) and to `listener(message, channel)`.
   * Subscriptions are restored after a reconnect. On RESP3 the connection can keep running other commands; on
   * RESP2 it cannot (use a {@link duplicate} for subscriptions then).
   */
  async subscribe(channels: string | string[], listener?: (message: string, channel: string) => void): Promise<void> {
    const list = Array.isArray(channels) ? channels : [channels];
    for (const ch of list) {
      this.channels.add(ch);
      if (listener) {
        if (!this.channelListeners.has(ch)) this.channelListeners.set(ch, new Set());
        this.channelListeners.get(ch)!.add(listener);
      }
    }
    await this.sendSub("subscribe", list);
  }

  /** `PSUBSCRIBE`: messages arrive as `'pmessage'` events (pattern, channel, message) and to the listener. */
  async psubscribe(patterns: string | string[], listener?: (message: string, channel: string, pattern: string) => void): Promise<void> {
    const list = Array.isArray(patterns) ? patterns : [patterns];
    for (const pt of list) {
      this.patterns.add(pt);
      if (listener) {
        if (!this.patternListeners.has(pt)) this.patternListeners.set(pt, new Set());
        this.patternListeners.get(pt)!.add(listener);
      }
    }
    await this.sendSub("psubscribe", list);
  }

  /** `UNSUBSCRIBE [channel...]` (all channels when none is given). */
  async unsubscribe(...channels: string[]): Promise<void> {
    const list = channels.length ? channels : [...this.channels];
    for (const ch of list) {
      this.channels.delete(ch);
      this.channelListeners.delete(ch);
    }
    await this.sendSub("unsubscribe", channels, Math.max(1, list.length));
  }

  /** `PUNSUBSCRIBE [pattern...]` (all patterns when none is given). */
  async punsubscribe(...patterns: string[]): Promise<void> {
    const list = patterns.length ? patterns : [...this.patterns];
    for (const pt of list) {
      this.patterns.delete(pt);
      this.patternListeners.delete(pt);
    }
    await this.sendSub("punsubscribe", patterns, Math.max(1, list.length));
  }

  private sendSub(kind: SubKind, names: string[], expect = names.length): Promise<RespValue> {
    return new Promise((resolve, reject) => {
      const p: Pending = { args: [kind.toUpperCase(), ...names], resolve, reject, sent: false, done: false, expect, subKind: kind };
      this.enqueue(p, this.options.commandTimeout);
    });
  }

  // ---------------------------------------------------------------- lifecycle

  /** A new client with the same options (its own connection): for WATCH, blocking commands or RESP2 pub/sub. */
  duplicate(overrides: ClientOptions = {}): RuvioClient {
    return new RuvioClient({ ...this.options, ...overrides });
  }

  /**
   * Ends the client: commands not yet sent are rejected, commands already sent get their replies (each still
   * bounded by its timeout), then the connection closes. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    if (this.state === "closed") return;
    if (this.state === "connecting" && this.offline.some((p) => !p.done)) {
      // Commands asked for before the connection was ready are still sent, if it becomes ready in time.
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, this.options.connectTimeout);
        function done() {
          clearTimeout(t);
          resolve();
        }
        this.once("ready", done);
        this.once("end", done);
      });
    }
    const sock = this.socket;
    this.state = "closing";
    this.failOffline(new ConnectionError("client is closed"));
    this.sentinelWatcher?.disconnect();
    this.sentinelWatcher = null;
    const waiters = [...this.idleWaiters, ...this.busyWaiters];
    this.idleWaiters = [];
    await Promise.all(waiters.map((w) => w.close()));
    if (sock && !sock.destroyed) {
      const pending = this.inflight.slice(this.inflightHead).filter((p) => !p.done).length;
      if (pending > 0) await new Promise<void>((r) => this.drainWaiters.push(r));
      await new Promise<void>((r) => {
        if (sock.destroyed) return r();
        sock.once("close", () => r());
        sock.end();
        setTimeout(() => sock.destroy(), 1000).unref();
      });
    }
    this.finishClose();
  }

  /** Closes at once: commands waiting for replies are rejected with {@link ConnectionLostError}. */
  disconnect(): void {
    if (this.state === "closed") return;
    this.state = "closing";
    for (const w of [...this.idleWaiters, ...this.busyWaiters]) w.disconnect();
    this.idleWaiters = [];
    this.teardownSocket(new ConnectionLostError("client disconnected before the reply"));
    this.finishClose();
  }

  /** `await using c = createClient(...)` closes the client at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

function pairs(v: RespValue): Record<string, RespValue> {
  if (Array.isArray(v)) {
    const o: Record<string, RespValue> = {};
    for (let i = 0; i + 1 < v.length; i += 2) o[String(v[i])] = v[i + 1];
    return o;
  }
  return v as Record<string, RespValue>;
}

/**
 * Creates a client. It connects by itself; commands may be called at once (they wait until the connection is
 * ready, bounded by the timeouts).
 *
 * ```js
 * import { createClient } from 'ruvio-client';
 * const c = createClient({ host: '127.0.0.1', port: 6379 });
 * const token = await c.lease('job:nightly-report', 30_000);
 * ```
 */
export function createClient(options: ClientOptions = {}): RuvioClient {
  return new RuvioClient(options);
}
