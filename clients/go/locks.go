package ruvio

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease takes the single-holder lock key for ttl (LEASE key ttl_ms). ok is true and token is the grant's fencing
// token when the caller now holds it; ok is false when someone else holds it.
//
// Not retried automatically: after an error for which [FateUnknown] is true the grant may have happened (and
// its token is lost); the lock then frees itself when ttl ends.
func (c *Client) Lease(ctx context.Context, key string, ttl time.Duration) (token int64, ok bool, err error) {
	return c.grant(ctx, 0, "LEASE", key, ms(ttl))
}

// LeaseWait is Lease that queues for up to wait when the lock is taken (LEASE key ttl_ms WAIT timeout_ms);
// waiters are served in arrival order. wait 0 waits without a server-side timeout, until the lock is granted or
// ctx ends (ending ctx closes the connection, and the server drops a waiter whose connection closed).
// The command timeout is extended by wait.
func (c *Client) LeaseWait(ctx context.Context, key string, ttl, wait time.Duration) (token int64, ok bool, err error) {
	if wait < 0 {
		return 0, false, errors.New("ruvio: wait must not be negative")
	}
	return c.grant(ctx, waitExtra(wait), "LEASE", key, ms(ttl), "WAIT", ms(wait))
}

// Semaphore takes one of limit slots of the semaphore key for ttl (SEMAPHORE key limit ttl_ms). ok is false when
// all limit slots are taken. Each slot has its own token and TTL; give the token to Release and Renew.
// Not retried automatically, as Lease.
func (c *Client) Semaphore(ctx context.Context, key string, limit int, ttl time.Duration) (token int64, ok bool, err error) {
	return c.grant(ctx, 0, "SEMAPHORE", key, limit, ms(ttl))
}

// SemaphoreWait is Semaphore that queues for up to wait for a free slot (see LeaseWait for wait 0).
func (c *Client) SemaphoreWait(ctx context.Context, key string, limit int, ttl, wait time.Duration) (token int64, ok bool, err error) {
	if wait < 0 {
		return 0, false, errors.New("ruvio: wait must not be negative")
	}
	return c.grant(ctx, waitExtra(wait), "SEMAPHORE", key, limit, ms(ttl), "WAIT", ms(wait))
}

// waitExtra: how much longer than the command timeout a waiting grant may take (negative: unbounded).
func waitExtra(wait time.Duration) time.Duration {
	if wait == 0 {
		return -1
	}
	return wait
}

func (c *Client) grant(ctx context.Context, extra time.Duration, args ...any) (int64, bool, error) {
	replies, err := c.exec(ctx, [][]any{args}, extra)
	if err != nil {
		return 0, false, err
	}
	switch v := replies[0].(type) {
	case nil:
		return 0, false, nil
	case int64:
		return v, true, nil
	case *Error:
		return 0, false, v
	default:
		return 0, false, fmt.Errorf("ruvio: unexpected %s reply %T", args[0], v)
	}
}

// Renew moves the deadline of the holder token of key to now + ttl (RENEW key token ttl_ms). It returns true
// when token holds key, false when it does not (expired, released, deleted, never held): an expired grant is
// never revived. Safe to retry after a failure.
func (c *Client) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (bool, error) {
	return c.oneOrZero(ctx, "RENEW", key, token, ms(ttl))
}

// Release frees what token holds on key, the lease or its semaphore slot (RELEASE key token). It returns true
// when released, false when the token no longer held it (a stale holder cannot free someone else's lock).
// Safe to retry after a failure (a retry may then answer false: the first attempt got through).
func (c *Client) Release(ctx context.Context, key string, token int64) (bool, error) {
	return c.oneOrZero(ctx, "RELEASE", key, token)
}

// IfGT is a fenced write (IFGT key token value [PX ms]): it sets key to value unless key has already seen a
// higher token, and returns whether it wrote. ttl > 0 gives the value a time to live.
func (c *Client) IfGT(ctx context.Context, key string, token int64, value any, ttl time.Duration) (bool, error) {
	if ttl > 0 {
		return c.oneOrZero(ctx, "IFGT", key, token, value, "PX", ms(ttl))
	}
	return c.oneOrZero(ctx, "IFGT", key, token, value)
}

func (c *Client) oneOrZero(ctx context.Context, args ...any) (bool, error) {
	n, err := Int64(c.Do(ctx, args...))
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// LockInfo describes a lock (LOCKINFO key).
type LockInfo struct {
	Kind    string       // "lease" or "semaphore"
	Limit   int64        // 1 for a lease
	Holders []LockHolder // semaphore holders in the order they were granted
	Waiters int64        // clients queued with WAIT
}

// LockHolder is one holder of a lock.
type LockHolder struct {
	Token     int64
	Remaining time.Duration // until the holder's deadline, as the server saw it when it answered
}

// LockInfo returns a description of the lock at key; ok is false when key does not exist.
func (c *Client) LockInfo(ctx context.Context, key string) (info LockInfo, ok bool, err error) {
	v, err := c.Do(ctx, "LOCKINFO", key)
	if err != nil || v == nil {
		return info, false, err
	}
	m, err := StringMap(v, nil)
	if err != nil {
		return info, false, err
	}
	if info.Kind, err = String(m["kind"], nil); err != nil {
		return info, false, fmt.Errorf("ruvio: LOCKINFO kind: %w", err)
	}
	if info.Limit, err = Int64(m["limit"], nil); err != nil {
		return info, false, fmt.Errorf("ruvio: LOCKINFO limit: %w", err)
	}
	if info.Waiters, err = Int64(m["waiters"], nil); err != nil {
		return info, false, fmt.Errorf("ruvio: LOCKINFO waiters: %w", err)
	}
	holders, ok := m["holders"].([]any)
	if !ok {
		return info, false, fmt.Errorf("ruvio: LOCKINFO holders: %T", m["holders"])
	}
	for _, h := range holders {
		hm, err := StringMap(h, nil)
		if err != nil {
			return info, false, err
		}
		tok, err := Int64(hm["token"], nil)
		if err != nil {
			return info, false, fmt.Errorf("ruvio: LOCKINFO token: %w", err)
		}
		rem, err := Int64(hm["remaining_ms"], nil)
		if err != nil {
			return info, false, fmt.Errorf("ruvio: LOCKINFO remaining_ms: %w", err)
		}
		info.Holders = append(info.Holders, LockHolder{Token: tok, Remaining: time.Duration(rem) * time.Millisecond})
	}
	return info, true, nil
}
