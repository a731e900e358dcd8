// Package ruvio is the Go client for Ruvio, a Redis-protocol key-value server built for safe distributed
// locking: every lock grant returns a 64-bit fencing token that only grows.
//
//	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: "127.0.0.1:6379"})
//	if err != nil { return err }
//
//	token, ok, err := c.Lease(ctx, "job:nightly-report", 30*time.Second)
//	if err != nil { return err }
//	if !ok { return nil } // someone else holds it
//	// you hold it
//	released, err := c.Release(ctx, "job:nightly-report", token)
//
// # Clients, pools and contexts
//
// A [Client] is a pool of connections, safe for concurrent use by many goroutines (as go-redis's). Every call
// takes a context.Context whose deadline and cancellation bound the call in flight: waiting for a pooled
// connection, dialing, and the command itself. A command interrupted after it was sent closes its connection and
// returns a [*NetError] with Sent set: its fate is unknown. [Options.CommandTimeout] (default 5 s) bounds each
// command as well; lock commands that wait in the server's queue get their wait added.
//
// # Locks
//
// [Client.Lease], [Client.Semaphore] and their waiting forms return (token, ok, err): ok false means "not
// acquired". [Client.Renew], [Client.Release] and [Client.IfGT] return whether the token still held (or wrote).
// [Client.Acquire] returns a [Lock] that renews itself at about TTL/3 and closes its Done channel when the lock
// is lost, before the server-side deadline, measured on this process's monotonic clock: the shape of etcd's
// concurrency.Session.
//
// LEASE and SEMAPHORE are never retried automatically: after a timeout or a lost connection the grant may have
// happened and its token is lost (the lock then frees itself when its TTL ends). RENEW and RELEASE carry the
// token and are safe for the caller to retry. The client retries nothing on its own; only the Lock's renewal
// loop repeats RENEW until it succeeds or the loss deadline passes.
//
// # Any command
//
// [Client.Do] sends any command and returns the reply as a Go value:
//
//	simple, bulk and verbatim strings   string
//	integers                            int64
//	doubles                             float64
//	booleans                            bool
//	big numbers                         *big.Int
//	nil (RESP2 null bulk/array, RESP3 _) nil
//	arrays and sets                     []any
//	maps                                map[string]any (keys formatted with fmt when not strings)
//
// An error reply is returned as a [*Error] carrying the server's code. [String], [Int64], [Float64], [Strings]
// and [StringMap] convert replies and take Do's results directly: ruvio.Int64(c.Do(ctx, "INCR", "n")).
// [Client.Pipeline] sends many commands in one round trip, [Client.TxPipeline] and [Client.Watch] run MULTI/EXEC
// (with WATCH), [Client.Subscribe] and [Client.PSubscribe] open pub/sub subscriptions.
//
// # Protocol
//
// Connections ask for RESP3 (HELLO 3) and fall back to RESP2 when the server refuses it; [Options.Protocol]
// forces one. Replies convert to the same Go values in both.
//
// # Errors
//
//   - [*Error]: an error reply; errors.Is(err, ruvio.ErrWrongType) / ErrReadOnly / ErrorCode("LOADING") match
//     its code.
//   - [*NetError] with Kind [ErrTimeout], [ErrConnectionLost] or [ErrUnreachable] (use errors.Is); its Sent field
//     (or [FateUnknown]) tells whether the command may have run. errors.Is also matches the cause, such as
//     context.DeadlineExceeded or context.Canceled.
//   - [ErrClosed], [ErrNil] (from the converters), [ErrTxAborted] (a WATCHed key changed).
//
// # Failover
//
// With [Options.SentinelAddrs] and [Options.MasterName] the client finds the primary through the Sentinel
// protocol (SENTINEL get-master-addr-by-name, confirmed with ROLE), follows +switch-master events, and looks
// again after a -READONLY reply, a lost connection or an unreachable primary.
package ruvio
