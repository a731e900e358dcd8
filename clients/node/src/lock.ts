import "./dispose.js";
import { performance } from "node:perf_hooks";
import type { RuvioClient, Token } from "./client.js";
import { LockLostError, RuvioError } from "./errors.js";

/** Options of {@link RuvioClient.acquire} and {@link RuvioClient.using}. */
export interface AcquireOptions {
  /** Wait up to this many ms for the lock in the server's fair queue (`WAIT`; `Infinity`: no limit). Default: do not wait. */
  waitMs?: number;
  /** Take a slot of a semaphore with this many slots instead of a single-holder lease. */
  limit?: number;
  /** Renew in the background (default true). With false, the signal still aborts before the deadline. */
  autoRenew?: boolean;
  /** Renewal period. Default TTL/3. */
  renewEveryMs?: number;
  /**
   * Cap on the total hold time, from the acquisition: renewals never extend the lock beyond it, so a stuck
   * process cannot hold it forever; the signal aborts as the capped deadline approaches. Default: no cap.
   */
  maxHoldMs?: number;
  /**
   * How long before the server-side deadline the signal aborts when no renewal succeeded. The deadline is counted
   * from when the granting/renewing request was sent (so the round trip is already on the safe side), on the
   * client's monotonic clock. Default: TTL/10, at most 1000 ms.
   */
  safetyMarginMs?: number;
}

const now = () => performance.now();

/**
 * A held lock (lease or semaphore slot). It renews itself at about TTL/3; `signal` aborts (with a
 * {@link LockLostError} as `signal.reason`) when the lock is lost or must be assumed lost: RENEW answered 0, or no
 * renewal succeeded and the deadline minus the safety margin passed on the client's monotonic clock.
 * `release()` ends it; after a loss it answers false and does not throw.
 */
export class LockHandle implements AsyncDisposable {
  /** The fencing token (decimal string): pass it to the writes the lock protects. */
  readonly token: Token;
  /** Aborts when the lock is lost. */
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private renewTimer: NodeJS.Timeout | null = null;
  private lossTimer: NodeJS.Timeout | null = null;
  private validUntil: number;
  private readonly capAt: number;
  private readonly margin: number;
  private released = false;
  private renewing = false;

  /** @internal */
  constructor(
    private readonly client: RuvioClient,
    /** The lock's key. */
    readonly key: string,
    token: Token,
    /** The TTL each renewal asks for. */
    readonly ttlMs: number,
    sentAt: number,
    private readonly opts: AcquireOptions,
  ) {
    this.token = token;
    this.signal = this.controller.signal;
    this.validUntil = sentAt + ttlMs;
    this.capAt = opts.maxHoldMs !== undefined ? sentAt + opts.maxHoldMs : Infinity;
    this.margin = opts.safetyMarginMs ?? Math.min(ttlMs / 10, 1000);
    this.armLoss();
    if (opts.autoRenew !== false) this.scheduleRenew(opts.renewEveryMs ?? ttlMs / 3);
  }

  /** True once the lock is lost (the signal aborted). */
  get lost(): boolean {
    return this.signal.aborted;
  }

  /** Milliseconds the lock is known to be held for, on the client's monotonic clock (0 once lost). */
  get remainingMs(): number {
    if (this.lost || this.released) return 0;
    return Math.max(0, this.validUntil - this.margin - now());
  }

  private armLoss(): void {
    if (this.lossTimer) clearTimeout(this.lossTimer);
    const at = this.validUntil - this.margin;
    this.lossTimer = setTimeout(() => {
      const why = this.validUntil >= this.capAt - 1 ? "the hold cap (maxHoldMs) was reached" : "no renewal succeeded before the deadline";
      this.lose(why);
    }, Math.max(0, at - now()));
  }

  private lose(why: string, cause?: unknown): void {
    if (this.lost || this.released) return;
    this.stopTimers();
    this.controller.abort(new LockLostError(this.key, this.token, why, cause === undefined ? undefined : { cause }));
  }

  private stopTimers(): void {
    if (this.renewTimer) clearTimeout(this.renewTimer);
    if (this.lossTimer) clearTimeout(this.lossTimer);
    this.renewTimer = this.lossTimer = null;
  }

  private scheduleRenew(delay: number): void {
    if (this.lost || this.released) return;
    if (this.renewTimer) clearTimeout(this.renewTimer);
    this.renewTimer = setTimeout(() => void this.renewOnce(), Math.max(0, delay));
  }

  private async renewOnce(): Promise<void> {
    if (this.lost || this.released || this.renewing) return;
    const period = this.opts.renewEveryMs ?? this.ttlMs / 3;
    const sentAt = now();
    const ttl = Math.floor(Math.min(this.ttlMs, this.capAt - sentAt));
    if (ttl < 1) return; // cap reached: no more renewals; the loss timer fires before the deadline
    // Wait for the reply no longer than until the lock must be assumed lost.
    const timeout = Math.max(1, Math.floor(this.validUntil - this.margin - sentAt));
    this.renewing = true;
    try {
      const ok = await this.client.sendCommand(["RENEW", this.key, this.token, ttl], { timeout });
      if (this.lost || this.released) return;
      if (ok === 1) {
        this.validUntil = Math.max(this.validUntil, sentAt + ttl);
        this.armLoss();
        this.scheduleRenew(period);
      } else {
        this.lose("RENEW answered 0: the token no longer holds the lock");
      }
    } catch (e) {
      if (this.lost || this.released) return;
      if (this.client.isClosed) {
        this.lose("the client was closed", e);
      } else if (e instanceof RuvioError && !("code" in e)) {
        // A timeout or a connection loss: RENEW carries the token, so trying again is safe.
        this.scheduleRenew(Math.min(period, Math.max(10, (this.validUntil - this.margin - now()) / 3)));
      } else {
        this.lose(`RENEW failed: ${(e as Error).message}`, e);
      }
    } finally {
      this.renewing = false;
    }
  }

  /** Renews now (besides the background renewals): true when the lock is still held. */
  async renew(): Promise<boolean> {
    if (this.lost || this.released) return false;
    const sentAt = now();
    const ttl = Math.floor(Math.min(this.ttlMs, this.capAt - sentAt));
    if (ttl < 1) return false;
    const ok = await this.client.renew(this.key, this.token, ttl);
    if (!ok) this.lose("RENEW answered 0: the token no longer holds the lock");
    else if (!this.lost) {
      this.validUntil = Math.max(this.validUntil, sentAt + ttl);
      this.armLoss();
    }
    return ok;
  }

  /**
   * Stops renewing and sends RELEASE (retried up to 3 times after a timeout or connection loss: RELEASE carries
   * the token, so that is safe). True when this call released the lock; false when it was lost or already
   * released. Never throws for a lost lock.
   */
  async release(): Promise<boolean> {
    if (this.released) return false;
    const wasLost = this.lost;
    this.released = true;
    this.stopTimers();
    let last: unknown;
    for (let i = 0; i < 3; i++) {
      try {
        const ok = await this.client.release(this.key, this.token);
        return ok && !wasLost;
      } catch (e) {
        last = e;
        if (!(e instanceof RuvioError) || "code" in e) break;
      }
    }
    if (wasLost) return false;
    throw last;
  }

  /** `await using lock = await c.acquire(...)`: releases at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release().catch(() => {});
  }
}

/** @internal */
export async function acquireLock(client: RuvioClient, key: string, ttlMs: number, opts: AcquireOptions): Promise<LockHandle | null> {
  const sentAt = now();
  const token =
    opts.limit !== undefined
      ? await client.semaphore(key, opts.limit, ttlMs, { waitMs: opts.waitMs })
      : await client.lease(key, ttlMs, { waitMs: opts.waitMs });
  if (token === null) return null;
  // With WAIT the grant may come later than the send: the deadline counted from the send is on the safe side.
  return new LockHandle(client, key, token, ttlMs, sentAt, opts);
}
