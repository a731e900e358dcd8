package ruvio

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"time"
)

// Client is a pool of connections to one Ruvio server (or, with Sentinel discovery, to the current primary).
// It is safe for concurrent use by many goroutines: each call takes a connection from the pool for the time of
// its command and gives it back; at most Options.PoolSize connections are open at once. Create one Client and
// share it; Close it when done.
//
// Every call takes a context.Context: its deadline and its cancellation bound the call in flight, including the
// wait for a free connection, dialing and the command itself. A call interrupted after its command was sent
// closes that connection and returns a [*NetError] whose Sent is true: the command's fate is unknown.
type Client struct {
	opts Options
	pool *pool
	disc *discovery // nil without Sentinel

	mu     sync.Mutex
	locks  map[*Lock]struct{}
	closed bool
}

// Connect opens a client and checks that the server answers (one connection is opened and kept), so a wrong
// address or password fails here. ctx bounds this first connection.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Client{opts: opts.withDefaults(), locks: map[*Lock]struct{}{}}
	addr := func(context.Context) (string, error) { return c.opts.Addr, nil }
	if len(c.opts.SentinelAddrs) > 0 {
		c.disc = newDiscovery(&c.opts)
		addr = c.disc.primary
	}
	c.pool = newPool(&c.opts, addr)
	if c.disc != nil {
		c.disc.onChange = c.pool.reset
	}
	cn, err := c.pool.get(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.pool.put(cn)
	if c.disc != nil {
		c.disc.watch()
	}
	return c, nil
}

// ConnectURL is Connect with Options from [ParseURL].
func ConnectURL(ctx context.Context, url string) (*Client, error) {
	o, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	return Connect(ctx, o)
}

// Options returns the options the client runs with (defaults filled in).
func (c *Client) Options() Options { return c.opts }

// Close releases the locks held through [Client.Acquire] that are still held (best effort, bounded by the
// command timeout), stops their renewal, and closes every connection. Calls after Close return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	locks := make([]*Lock, 0, len(c.locks))
	for l := range c.locks {
		locks = append(locks, l)
	}
	c.mu.Unlock()
	for _, l := range locks {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout+c.opts.CommandTimeout)
		_, _ = l.Release(ctx)
		cancel()
	}
	if c.disc != nil {
		c.disc.stop()
	}
	c.pool.close()
	return nil
}

// exec runs cmds on one pooled connection in one round trip. extra lengthens the command timeout (lock waits).
func (c *Client) exec(ctx context.Context, cmds [][]any, extra time.Duration) ([]any, error) {
	cn, err := c.pool.get(ctx)
	if err != nil {
		c.noteFailure(err)
		return nil, err
	}
	replies, err := cn.roundTrip(ctx, cmds, c.timeout(extra))
	c.pool.put(cn)
	if err != nil {
		c.noteFailure(err)
		return nil, err
	}
	for _, r := range replies {
		c.noteReply(r)
	}
	return replies, nil
}

func (c *Client) timeout(extra time.Duration) time.Duration {
	if c.opts.CommandTimeout < 0 || extra < 0 {
		return 0
	}
	return c.opts.CommandTimeout + extra
}

// noteFailure: with discovery, a lost connection, an unreachable or unresponsive server may mean a failover:
// look again.
func (c *Client) noteFailure(err error) {
	if c.disc == nil {
		return
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return // the caller's context ended: says nothing about the primary
	}
	if errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrUnreachable) || errors.Is(err, ErrTimeout) {
		c.disc.invalidate()
	}
}

// noteReply: a -READONLY answer means we talk to a replica: rediscover the primary.
func (c *Client) noteReply(v any) {
	if c.disc == nil {
		return
	}
	if e, ok := v.(*Error); ok && e.Code == "READONLY" {
		c.disc.invalidate()
	}
}

// Do sends any command and returns its reply as a natural Go value (see [Client.Do] value table in the package
// documentation: string, int64, float64, bool, *big.Int, nil, []any, map[string]any). An error reply is returned
// as a *Error; a nil reply as a nil value with a nil error.
//
//	v, err := c.Do(ctx, "SET", "greeting", "hello", "EX", 60)
func (c *Client) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("ruvio: Do needs a command")
	}
	replies, err := c.exec(ctx, [][]any{args}, 0)
	if err != nil {
		return nil, err
	}
	if e, ok := replies[0].(*Error); ok {
		return nil, e
	}
	return replies[0], nil
}

// doExact is Do with the decoder's exact view of the reply (see readExact); error replies are values.
func (c *Client) doExact(ctx context.Context, args ...any) (any, error) {
	cn, err := c.pool.get(ctx)
	if err != nil {
		return nil, err
	}
	cn.exact = true
	replies, err := cn.roundTrip(ctx, [][]any{args}, c.timeout(-1))
	cn.exact = false
	c.pool.put(cn)
	if err != nil {
		return nil, err
	}
	return replies[0], nil
}

// Ping sends PING.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.Do(ctx, "PING")
	return err
}

// Get returns the string at key; ok is false when the key does not exist.
func (c *Client) Get(ctx context.Context, key string) (value string, ok bool, err error) {
	v, err := c.Do(ctx, "GET", key)
	if err != nil || v == nil {
		return "", false, err
	}
	s, err := String(v, nil)
	return s, err == nil, err
}

// Set sets key to value, with a time to live when ttl > 0 (PX, milliseconds).
func (c *Client) Set(ctx context.Context, key string, value any, ttl time.Duration) error {
	args := []any{"SET", key, value}
	if ttl > 0 {
		args = append(args, "PX", ms(ttl))
	}
	_, err := c.Do(ctx, args...)
	return err
}

// Del deletes keys and returns how many existed.
func (c *Client) Del(ctx context.Context, keys ...string) (int64, error) {
	args := make([]any, 0, len(keys)+1)
	args = append(args, "DEL")
	for _, k := range keys {
		args = append(args, k)
	}
	return Int64(c.Do(ctx, args...))
}

// Incr increments the integer at key and returns the new value.
func (c *Client) Incr(ctx context.Context, key string) (int64, error) {
	return Int64(c.Do(ctx, "INCR", key))
}

// Publish sends message to channel and returns how many subscribers received it.
func (c *Client) Publish(ctx context.Context, channel string, message any) (int64, error) {
	return Int64(c.Do(ctx, "PUBLISH", channel, message))
}

// ms converts a duration to whole milliseconds for the wire, at least 1 for a positive duration.
func ms(d time.Duration) int64 {
	n := d.Milliseconds()
	if n == 0 && d > 0 {
		return 1
	}
	return n
}

// String converts a reply to a string: strings as they are, integers and doubles formatted. A nil reply is
// ErrNil. It takes Do's two results directly: ruvio.String(c.Do(ctx, "GET", "k")).
func String(v any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case *big.Int:
		return x.String(), nil
	case nil:
		return "", ErrNil
	}
	return "", fmt.Errorf("ruvio: cannot convert a %T reply to string", v)
}

// Int64 converts a reply to an int64: integers as they are, strings parsed. A nil reply is ErrNil.
func Int64(v any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("ruvio: cannot convert %q to int64", x)
		}
		return n, nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case nil:
		return 0, ErrNil
	}
	return 0, fmt.Errorf("ruvio: cannot convert a %T reply to int64", v)
}

// Float64 converts a reply to a float64: doubles as they are, strings parsed. A nil reply is ErrNil.
func Float64(v any, err error) (float64, error) {
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, fmt.Errorf("ruvio: cannot convert %q to float64", x)
		}
		return f, nil
	case nil:
		return 0, ErrNil
	}
	return 0, fmt.Errorf("ruvio: cannot convert a %T reply to float64", v)
}

// Strings converts an array reply to []string (nil elements become ""). A nil reply is ErrNil.
func Strings(v any, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, ErrNil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("ruvio: cannot convert a %T reply to []string", v)
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		if e == nil {
			continue
		}
		if out[i], err = String(e, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// StringMap converts a map reply (RESP3) or a flat key/value array (RESP2) to map[string]any.
func StringMap(v any, err error) (map[string]any, error) {
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case map[string]any:
		return x, nil
	case []any:
		if len(x)%2 != 0 {
			return nil, fmt.Errorf("ruvio: a flat map reply with an odd number (%d) of elements", len(x))
		}
		m := make(map[string]any, len(x)/2)
		for i := 0; i < len(x); i += 2 {
			k, err := String(x[i], nil)
			if err != nil {
				return nil, err
			}
			m[k] = x[i+1]
		}
		return m, nil
	case nil:
		return nil, ErrNil
	}
	return nil, fmt.Errorf("ruvio: cannot convert a %T reply to a map", v)
}
