/**
 * The error model of ruvio-client.
 *
 * - {@link ReplyError}: the server answered with an error reply; `code` is its first word (`ERR`, `WRONGTYPE`,
 *   `READONLY`, `NOAUTH`, ...). The command ran (or was refused) on the server: its fate is known.
 * - {@link TimeoutError}: no reply within the command timeout. When `sent` is true the command may or may not have
 *   run on the server (`fateUnknown`); when false it never left the client.
 * - {@link ConnectionLostError}: the connection dropped after the command was written and before its reply came:
 *   its fate is unknown. The client never re-sends such a command by itself.
 * - {@link ConnectionError}: the client could not connect, or was closed, before the command was written.
 * - {@link LockLostError}: the reason of a lock handle's `AbortSignal` when the lock is lost.
 * - {@link LockNotAcquiredError}: {@link RuvioClient.using} could not take the lock.
 *
 * All of them extend {@link RuvioError}.
 */

/** Base class of every error this client produces. */
export class RuvioError extends Error {
  /** True when a command may or may not have been executed by the server. */
  readonly fateUnknown: boolean;
  constructor(message: string, fateUnknown = false, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.fateUnknown = fateUnknown;
  }
}

/** An error reply from the server, e.g. `WRONGTYPE Operation against a key holding the wrong kind of value`. */
export class ReplyError extends RuvioError {
  /** The first word of the error reply: `ERR`, `WRONGTYPE`, `READONLY`, `NOAUTH`, `EXECABORT`, ... */
  readonly code: string;
  /** The command (name and arguments) that received this reply, when known. */
  command?: string[];
  constructor(message: string) {
    super(message, false);
    const space = message.indexOf(" ");
    this.code = space === -1 ? message : message.slice(0, space);
  }
}

/** The command timeout passed. `sent` tells whether it had been written to the server (then `fateUnknown`). */
export class TimeoutError extends RuvioError {
  /** Whether the command had been written to the socket when the timeout passed. */
  readonly sent: boolean;
  constructor(message: string, sent: boolean) {
    super(message, sent);
    this.sent = sent;
  }
}

/** The client could not reach the server, or was closed, and the command was never sent. */
export class ConnectionError extends RuvioError {
  constructor(message: string, fateUnknown = false, options?: { cause?: unknown }) {
    super(message, fateUnknown, options);
  }
}

/** The connection was lost after the command was written: it may or may not have run (`fateUnknown` is true). */
export class ConnectionLostError extends ConnectionError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, true, options);
  }
}

/** Reason given to a lock handle's AbortSignal when the lock is, or must be assumed, lost. */
export class LockLostError extends RuvioError {
  /** The lock's key. */
  readonly key: string;
  /** The token that held it. */
  readonly token: string;
  constructor(key: string, token: string, why: string, options?: { cause?: unknown }) {
    super(`lock ${key} (token ${token}) lost: ${why}`, false, options);
    this.key = key;
    this.token = token;
  }
}

/** {@link RuvioClient.using} found the lock held by someone else (after waiting, when asked to wait). */
export class LockNotAcquiredError extends RuvioError {
  /** The lock's key. */
  readonly key: string;
  constructor(key: string) {
    super(`lock ${key} is held by someone else`);
    this.key = key;
  }
}
