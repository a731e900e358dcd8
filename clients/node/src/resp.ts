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
const INTEGER = /^-?[0-9]+$/;
const DOUBLE = /^(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|-inf|nan)$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A RESP protocol violation in the bytes received; the connection that produced them must be dropped. */
export class ProtocolError extends Error {}

function protocolError(what: string): ProtocolError {
  return new ProtocolError(`RESP protocol error: ${what}`);
}

function length(line: string): number {
  if (!INTEGER.test(line)) throw protocolError(`invalid length ${JSON.stringify(line)}`);
  return Number(line);
}

/**
 * The decoder's type-preserving form (used by the conformance runner): every value is an object with a `type`
 * (`nil`, `simple`, `error`, `integer`, `bulk`, `array`, `map`, `set`, `double`, `boolean`, `verbatim`,
 * `bignumber`, `push`), integers as decimal strings, map entries as `[key, value]` pairs in wire order.
 * @internal
 */
export type ModelValue = { type: string; [field: string]: unknown };

function model(v: ModelValue): RespValue {
  return v as unknown as RespValue;
}

function errorModel(text: string): ModelValue {
  const space = text.indexOf(" ");
  return { type: "error", text, code: space === -1 ? text : text.slice(0, space) };
}

function bytesModel(b: Buffer): ModelValue {
  try {
    return { type: "bulk", value: utf8.decode(b) };
  } catch {
    return { type: "bulk", hex: b.toString("hex") };
  }
}
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
  /** @internal Produce {@link ModelValue}s (the conformance corpus's typed form) instead of JavaScript values. */
  model = false;

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

  /** Bytes received but not yet decoded (a partial value). */
  buffered(): number {
    return this.buf.length - this.pos;
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
    if (this.buf[this.pos + len] !== 13 || this.buf[this.pos + len + 1] !== 10) {
      throw protocolError(`a ${len}-byte string not followed by CRLF`);
    }
    this.pos += len + 2;
    return b;
  }

  private parse(): Parsed {
    if (this.pos >= this.buf.length) return INCOMPLETE;
    const type = this.buf[this.pos++];
    const line = this.line();
    if (line === INCOMPLETE) return INCOMPLETE;
    const m = this.model;
    switch (type) {
      case 43: // +
        return m ? model({ type: "simple", value: line }) : line;
      case 45: // -
        return m ? model(errorModel(line)) : new ReplyError(line);
      case 58: // :
        if (!INTEGER.test(line)) throw protocolError(`invalid integer ${JSON.stringify(line)}`);
        return m ? model({ type: "integer", value: BigInt(line).toString() }) : toInteger(line);
      case 36: { // $
        const len = length(line);
        if (len < 0) return m ? model({ type: "nil" }) : null;
        const b = this.blob(len);
        if (b === INCOMPLETE) return INCOMPLETE;
        if (m) return model(bytesModel(b));
        return this.buffers ? Buffer.from(b) : b.toString("utf8");
      }
      case 33: { // ! blob error
        const b = this.blob(length(line));
        if (b === INCOMPLETE) return INCOMPLETE;
        return m ? model(errorModel(b.toString("utf8"))) : new ReplyError(b.toString("utf8"));
      }
      case 61: { // = verbatim
        const b = this.blob(length(line));
        if (b === INCOMPLETE) return INCOMPLETE;
        if (b.length < 4 || b[3] !== 58) throw protocolError("verbatim string without a format");
        return m ? model({ type: "verbatim", format: b.toString("utf8", 0, 3), value: b.toString("utf8", 4) }) : b.toString("utf8", 4);
      }
      case 42: // *
      case 126: // ~
      case 62: { // >
        const n = length(line);
        if (n < 0) return m ? model({ type: "nil" }) : null;
        const out: RespValue[] = new Array(n);
        for (let i = 0; i < n; i++) {
          const v = this.parse();
          if (v === INCOMPLETE) return INCOMPLETE;
          out[i] = v;
        }
        if (m) return model({ type: type === 42 ? "array" : type === 126 ? "set" : "push", items: out });
        return type === 62 ? new Push(out) : out;
      }
      case 37: { // % map
        const n = length(line);
        const entries: [RespValue, RespValue][] = [];
        const out: { [key: string]: RespValue } = {};
        for (let i = 0; i < n; i++) {
          const k = this.parse();
          if (k === INCOMPLETE) return INCOMPLETE;
          const v = this.parse();
          if (v === INCOMPLETE) return INCOMPLETE;
          if (m) entries.push([k, v]);
          else out[Buffer.isBuffer(k) ? k.toString("utf8") : String(k)] = v;
        }
        return m ? model({ type: "map", entries }) : out;
      }
      case 124: { // | attribute: read and drop, then the value it annotates
        const n = length(line);
        for (let i = 0; i < 2 * n; i++) if (this.parse() === INCOMPLETE) return INCOMPLETE;
        return this.parse();
      }
      case 95: // _
        if (line !== "") throw protocolError("null with a payload");
        return m ? model({ type: "nil" }) : null;
      case 35: // #
        if (line !== "t" && line !== "f") throw protocolError(`invalid boolean ${JSON.stringify(line)}`);
        return m ? model({ type: "boolean", value: line === "t" }) : line === "t";
      case 44: { // ,
        if (!DOUBLE.test(line)) throw protocolError(`invalid double ${JSON.stringify(line)}`);
        if (m) return model({ type: "double", value: line });
        if (line === "inf") return Infinity;
        if (line === "-inf") return -Infinity;
        if (line === "nan") return NaN;
        return Number(line);
      }
      case 40: // (
        if (!INTEGER.test(line)) throw protocolError(`invalid big number ${JSON.stringify(line)}`);
        return m ? model({ type: "bignumber", value: BigInt(line).toString() }) : BigInt(line);
      default:
        throw protocolError(`unexpected type byte ${JSON.stringify(String.fromCharCode(type))}`);
    }
  }
}
