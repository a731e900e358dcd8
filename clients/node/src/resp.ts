/**
 * RESP2/RESP3 encoder and incremental reply decoder.
 *
 * Decoded types: simple and bulk strings -> `string` (or `Buffer` with `buffers`), integers -> `number` when
 * exactly representable (|n| <= 2^53 - 1), else `bigint`; nil -> `null`; arrays and sets -> arrays; maps -> plain
 * objects (keys converted to strings); doubles -> `number`; booleans -> `boolean`; big numbers -> `bigint`;
 * verbatim strings -> `string` without the format prefix; error replies -> {@link ReplyError} values; push frames
 * -> {@link Push}; attributes are read and dropped.
 */
import { ReplyError } from "./errors.js";

/** A RESP value as this client returns it. */
export type RespValue =
  | string
  | number
  | bigint
  | boolean
  | null
  | Buffer
  | ReplyError
  | RespValue[]
  | { [key: string]: RespValue }
  | Push;

/** A RESP3 out-of-band push frame (pub/sub messages and confirmations). */
export class Push {
  constructor(readonly data: RespValue[]) {}
}

/** An argument of a command: strings and Buffers are sent as they are, numbers and bigints in decimal. */
export type Arg = string | Buffer | number | bigint;

const CRLF = "\r\n";

/** Encodes one command as a RESP array of bulk strings. */
export function encodeCommand(args: readonly Arg[]): Buffer {
  let hasBuffer = false;
  for (const a of args) if (Buffer.isBuffer(a)) hasBuffer = true;
  if (!hasBuffer) {
    let s = "*" + args.length + CRLF;
    for (const a of args) {
      const str = typeof a === "string" ? a : String(a);
      s += "$" + Buffer.byteLength(str) + CRLF + str + CRLF;
    }
    return Buffer.from(s);
  }
  const parts: Buffer[] = [Buffer.from("*" + args.length + CRLF)];
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(typeof a === "string" ? a : String(a));
    parts.push(Buffer.from("$" + b.length + CRLF), b, Buffer.from(CRLF));
  }
  return Buffer.concat(parts);
}

const INCOMPLETE = Symbol("incomplete");
type Parsed = RespValue | typeof INCOMPLETE;

function toInteger(text: string): number | bigint {
  const n = Number(text);
  if (Number.isSafeInteger(n)) return n;
  return BigInt(text);
}

/**
 * Incremental decoder: feed it socket chunks with {@link Decoder.push}; it calls `onValue` for every complete
 * top-level value, in order.
 */
export class Decoder {
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;
  /** Return bulk strings as Buffers instead of strings. */
  buffers = false;

  constructor(private readonly onValue: (v: RespValue) => void) {}

  /** Feeds one chunk of bytes. Throws on a protocol violation (the connection must then be dropped). */
  push(chunk: Buffer): void {
    this.buf = this.buf.length === this.pos ? chunk : Buffer.concat([this.buf.subarray(this.pos), chunk]);
    this.pos = 0;
    for (;;) {
      if (this.pos >= this.buf.length) break;
      const start = this.pos;
      const v = this.parse();
      if (v === INCOMPLETE) {
        this.pos = start;
        break;
      }
      this.onValue(v);
    }
  }

  /** Drops any partial input (after a reconnect). */
  reset(): void {
    this.buf = Buffer.alloc(0);
    this.pos = 0;
  }

  private line(): string | typeof INCOMPLETE {
    const end = this.buf.indexOf(13, this.pos);
    if (end === -1 || end + 1 >= this.buf.length) return INCOMPLETE;
    const s = this.buf.toString("latin1", this.pos, end);
    this.pos = end + 2;
    return s;
  }

  private blob(len: number): Buffer | typeof INCOMPLETE {
    if (this.pos + len + 2 > this.buf.length) return INCOMPLETE;
    const b = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len + 2;
    return b;
  }

  private parse(): Parsed {
    if (this.pos >= this.buf.length) return INCOMPLETE;
    const type = this.buf[this.pos++];
    const line = this.line();
    if (line === INCOMPLETE) return INCOMPLETE;
    switch (type) {
      case 43: // +
        return line;
      case 45: // -
        return new ReplyError(line);
      case 58: // :
        return toInteger(line);
      case 36: { // $
        const len = Number(line);
        if (len < 0) return null;
        const b = this.blob(len);
        if (b === INCOMPLETE) return INCOMPLETE;
        return this.buffers ? Buffer.from(b) : b.toString("utf8");
      }
      case 33: { // ! blob error
        const b = this.blob(Number(line));
        if (b === INCOMPLETE) return INCOMPLETE;
        return new ReplyError(b.toString("utf8"));
      }
      case 61: { // = verbatim
        const b = this.blob(Number(line));
        if (b === INCOMPLETE) return INCOMPLETE;
        return b.toString("utf8", 4);
      }
      case 42: // *
      case 126: // ~
      case 62: { // >
        const n = Number(line);
        if (n < 0) return null;
        const out: RespValue[] = new Array(n);
        for (let i = 0; i < n; i++) {
          const v = this.parse();
          if (v === INCOMPLETE) return INCOMPLETE;
          out[i] = v;
        }
        return type === 62 ? new Push(out) : out;
      }
      case 37: { // % map
        const n = Number(line);
        const out: { [key: string]: RespValue } = {};
        for (let i = 0; i < n; i++) {
          const k = this.parse();
          if (k === INCOMPLETE) return INCOMPLETE;
          const v = this.parse();
          if (v === INCOMPLETE) return INCOMPLETE;
          out[Buffer.isBuffer(k) ? k.toString("utf8") : String(k)] = v;
        }
        return out;
      }
      case 124: { // | attribute: read and drop, then the value it annotates
        const n = Number(line);
        for (let i = 0; i < 2 * n; i++) if (this.parse() === INCOMPLETE) return INCOMPLETE;
        return this.parse();
      }
      case 95: // _
        return null;
      case 35: // #
        return line === "t";
      case 44: { // ,
        if (line === "inf") return Infinity;
        if (line === "-inf") return -Infinity;
        if (line === "nan") return NaN;
        return Number(line);
      }
      case 40: // (
        return BigInt(line);
      default:
        throw new Error(`RESP protocol error: unexpected type byte ${JSON.stringify(String.fromCharCode(type))}`);
    }
  }
}
