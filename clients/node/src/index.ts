/**
 * ruvio-client: the Node.js client for Ruvio. See README.md.
 * @packageDocumentation
 */
import "./dispose.js";
export { Batch, createClient, RuvioClient, Pipeline, Transaction } from "./client.js";
export type { CommandOptions, ListedLock, LockInfo, PipelineResult, Token } from "./client.js";
export { LockHandle } from "./lock.js";
export type { AcquireOptions } from "./lock.js";
export type { Address, ClientOptions } from "./options.js";
export {
  ConnectionError,
  ConnectionLostError,
  LockLostError,
  LockNotAcquiredError,
  ReplyError,
  RuvioError,
  TimeoutError,
} from "./errors.js";
export { Push } from "./resp.js";
export type { Arg, RespValue } from "./resp.js";
