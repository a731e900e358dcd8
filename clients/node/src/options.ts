import type { ConnectionOptions as TlsConnectionOptions } from "node:tls";

/** A host and port (a server or a Sentinel-protocol coordinator). */
export interface Address {
  host: string;
  port: number;
}

/** Options of {@link createClient}. Every field is optional; the defaults connect to 127.0.0.1:6379 over RESP3. */
export interface ClientOptions {
  /** `redis://[[user]:password@]host[:port][/db]` or `rediss://...` (TLS). Fields given explicitly override it. */
  url?: string;
  /** Server host. Default `127.0.0.1`. */
  host?: string;
  /** Server port. Default `6379`. */
  port?: number;
  /** ACL user name (sent with the password; Ruvio's only user is `default`). */
  username?: string;
  /** Password (`HELLO 3 AUTH`, or `AUTH` on RESP2). */
  password?: string;
  /** Database number selected on every connection (`SELECT`). Default 0. */
  db?: number;
  /** Connection name (`CLIENT SETNAME`), visible in `CLIENT LIST`. */
  name?: string;
  /** RESP protocol version. Default 3; when the server refuses `HELLO 3` the client falls back to 2. */
  protocol?: 2 | 3;
  /** Milliseconds to open the connection and finish its handshake. Default 10000. */
  connectTimeout?: number;
  /**
   * Milliseconds a command may take from the call to its reply (including time spent queued while connecting).
   * Default 10000; 0 disables it (a command not yet sent is then still bounded by `connectTimeout`). LEASE and
   * SEMAPHORE with `waitMs` get `waitMs` on top.
   */
  commandTimeout?: number;
  /** `true` or Node.js `tls.connect` options: connect with TLS. `rediss://` URLs imply `true`. */
  tls?: boolean | TlsConnectionOptions;
  /** TCP keep-alive initial delay in milliseconds; 0 turns keep-alive off. Default 30000. */
  keepAlive?: number;
  /**
   * Reconnect after the connection is lost or could not be opened. `true` (default): back off 50 ms, 100 ms, ...
   * up to 2000 ms. A function gets the attempt number (1, 2, ...) and returns the delay in ms, or `null` to stop.
   * `false`: never reconnect (the client is then closed by the first failure).
   */
  reconnect?: boolean | ((attempt: number) => number | null);
  /** Do not connect until the first command (or {@link RuvioClient.connect}). Default false. */
  lazyConnect?: boolean;
  /**
   * Durable grants: send `CLIENT DURABILITY REPLICAS n` on every connection, so the server answers a grant only
   * once n replicas hold it. A server that refuses it fails the connection's handshake: the error reaches the
   * queued commands (and the `'error'` event), it is not ignored.
   */
  durability?: { replicas: number };
  /**
   * Failover discovery: the addresses of the coordinators (anything that speaks the Sentinel protocol). The client
   * asks them `SENTINEL get-master-addr-by-name <serviceName>`, confirms with `ROLE`, listens for
   * `+switch-master`, and rediscovers on `-READONLY` and on connection loss. `host`/`port` are then ignored.
   */
  sentinels?: Address[];
  /** The service (master) name known to the coordinators. Required with `sentinels`. */
  serviceName?: string;
  /** Password for the coordinators (when they require one). */
  sentinelPassword?: string;
  /** User for the coordinators. */
  sentinelUsername?: string;
}

/** The options after defaults and URL parsing. */
export interface ResolvedOptions extends ClientOptions {
  host: string;
  port: number;
  protocol: 2 | 3;
  connectTimeout: number;
  commandTimeout: number;
  keepAlive: number;
  reconnect: boolean | ((attempt: number) => number | null);
}

/** Applies defaults and parses `url`. */
export function resolveOptions(opts: ClientOptions = {}): ResolvedOptions {
  const fromUrl: ClientOptions = {};
  if (opts.url) {
    const u = new URL(opts.url);
    if (u.protocol !== "redis:" && u.protocol !== "rediss:") {
      throw new TypeError(`unsupported URL scheme ${u.protocol} (redis: or rediss:)`);
    }
    if (u.hostname) fromUrl.host = u.hostname.replace(/^\[|\]$/g, "");
    if (u.port) fromUrl.port = Number(u.port);
    if (u.username) fromUrl.username = decodeURIComponent(u.username);
    if (u.password) fromUrl.password = decodeURIComponent(u.password);
    const db = u.pathname.replace(/^\//, "");
    if (db) fromUrl.db = Number(db);
    if (u.protocol === "rediss:") fromUrl.tls = true;
    const proto = u.searchParams.get("protocol");
    if (proto === "2" || proto === "3") fromUrl.protocol = Number(proto) as 2 | 3;
  }
  const merged: ClientOptions = { ...fromUrl };
  for (const [k, v] of Object.entries(opts)) if (v !== undefined) (merged as Record<string, unknown>)[k] = v;
  if (merged.sentinels && !merged.serviceName) throw new TypeError("sentinels need a serviceName");
  return {
    ...merged,
    // A copy: discovery reorders it (the coordinator that answered is asked first next time).
    sentinels: merged.sentinels?.map((a) => ({ host: a.host, port: a.port })),
    host: merged.host ?? "127.0.0.1",
    port: merged.port ?? 6379,
    protocol: merged.protocol ?? 3,
    connectTimeout: merged.connectTimeout ?? 10_000,
    commandTimeout: merged.commandTimeout ?? 10_000,
    keepAlive: merged.keepAlive ?? 30_000,
    reconnect: merged.reconnect ?? true,
  };
}
