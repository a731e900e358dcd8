package ruvio

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Message is a message received on a subscription.
type Message struct {
	Channel string
	Pattern string // the matching pattern, for PSubscribe subscriptions
	Payload string
}

// PubSub is a subscription on its own connection (not taken from the pool). Messages arrive on Channel. When
// the connection is lost, PubSub reconnects (finding the primary again with Sentinel discovery) and
// subscribes again to everything it had; messages published meanwhile are lost, as with Redis.
// Its methods are safe for concurrent use. Close it when done.
type PubSub struct {
	c    *Client
	msgs chan *Message

	mu       sync.Mutex // guards the fields below and writes to cn
	cn       *conn
	channels map[string]struct{}
	patterns map[string]struct{}
	closed   bool
	confirm  chan struct{} // one value per subscribe/psubscribe confirmation
	skip     int           // confirmations of a re-subscription, not waited for by anyone
	wake     chan struct{}
	exited   chan struct{}
}

// Subscribe opens a subscription to channels (more can be added with PubSub.Subscribe and PubSub.PSubscribe).
// It returns once the server confirmed them.
func (c *Client) Subscribe(ctx context.Context, channels ...string) (*PubSub, error) {
	ps, err := c.newPubSub(ctx)
	if err != nil {
		return nil, err
	}
	if len(channels) > 0 {
		if err := ps.Subscribe(ctx, channels...); err != nil {
			ps.Close()
			return nil, err
		}
	}
	return ps, nil
}

// PSubscribe opens a subscription to glob patterns.
func (c *Client) PSubscribe(ctx context.Context, patterns ...string) (*PubSub, error) {
	ps, err := c.newPubSub(ctx)
	if err != nil {
		return nil, err
	}
	if err := ps.PSubscribe(ctx, patterns...); err != nil {
		ps.Close()
		return nil, err
	}
	return ps, nil
}

func (c *Client) newPubSub(ctx context.Context) (*PubSub, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	cn, err := c.dialCurrent(ctx)
	if err != nil {
		return nil, err
	}
	ps := &PubSub{
		c: c, cn: cn, msgs: make(chan *Message, 100),
		channels: map[string]struct{}{}, patterns: map[string]struct{}{},
		confirm: make(chan struct{}, 1024), wake: make(chan struct{}), exited: make(chan struct{}),
	}
	go ps.readLoop(cn)
	return ps, nil
}

// dialCurrent opens a connection outside the pool to the current primary.
func (c *Client) dialCurrent(ctx context.Context) (*conn, error) {
	addr := c.opts.Addr
	if c.disc != nil {
		var err error
		if addr, err = c.disc.primary(ctx); err != nil {
			return nil, err
		}
	}
	cn, err := dialConn(ctx, &c.opts, addr)
	if err != nil {
		c.noteFailure(err)
	}
	return cn, err
}

// Channel returns the channel messages arrive on. It is closed by Close. Read it steadily: the reader waits
// for you, and a server disconnects a subscriber that falls too far behind.
func (ps *PubSub) Channel() <-chan *Message { return ps.msgs }

// Subscribe adds channels and waits for the server's confirmation (bounded by ctx).
func (ps *PubSub) Subscribe(ctx context.Context, channels ...string) error {
	return ps.subscribe(ctx, "SUBSCRIBE", ps.channels, channels)
}

// PSubscribe adds patterns and waits for the server's confirmation (bounded by ctx).
func (ps *PubSub) PSubscribe(ctx context.Context, patterns ...string) error {
	return ps.subscribe(ctx, "PSUBSCRIBE", ps.patterns, patterns)
}

func (ps *PubSub) subscribe(ctx context.Context, cmd string, set map[string]struct{}, names []string) error {
	if len(names) == 0 {
		return errors.New("ruvio: " + cmd + " needs at least one name")
	}
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		return ErrClosed
	}
	for _, n := range names {
		set[n] = struct{}{}
	}
	err := ps.send(ctx, cmd, names)
	addr := ps.cn.addr
	ps.mu.Unlock()
	if err != nil {
		return err
	}
	var timeout <-chan time.Time
	if t := ps.c.timeout(0); t > 0 {
		timer := time.NewTimer(t)
		defer timer.Stop()
		timeout = timer.C
	}
	for range names {
		select {
		case <-ps.confirm:
		case <-ctx.Done():
			return netErr(ctx, addr, true, ctx.Err())
		case <-timeout:
			return &NetError{Kind: ErrTimeout, Addr: addr, Sent: true, Err: errors.New("no subscription confirmation within the command timeout")}
		case <-ps.exited:
			return ErrClosed
		}
	}
	return nil
}

// Unsubscribe leaves channels (all of them when none is given). It does not wait for the confirmation.
func (ps *PubSub) Unsubscribe(ctx context.Context, channels ...string) error {
	return ps.unsubscribe(ctx, "UNSUBSCRIBE", ps.channels, channels)
}

// PUnsubscribe leaves patterns (all of them when none is given).
func (ps *PubSub) PUnsubscribe(ctx context.Context, patterns ...string) error {
	return ps.unsubscribe(ctx, "PUNSUBSCRIBE", ps.patterns, patterns)
}

func (ps *PubSub) unsubscribe(ctx context.Context, cmd string, set map[string]struct{}, names []string) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return ErrClosed
	}
	if len(names) == 0 {
		for n := range set {
			delete(set, n)
		}
	}
	for _, n := range names {
		delete(set, n)
	}
	return ps.send(ctx, cmd, names)
}

// send writes one command on the current connection (ps.mu held). A failure closes the connection; the reader
// then reconnects and subscribes again to what the sets hold.
func (ps *PubSub) send(ctx context.Context, cmd string, names []string) error {
	args := make([]any, 0, len(names)+1)
	args = append(args, cmd)
	for _, n := range names {
		args = append(args, n)
	}
	buf, err := appendCommand(nil, args)
	if err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	if t := ps.c.timeout(0); t > 0 && (deadline.IsZero() || time.Now().Add(t).Before(deadline)) {
		deadline = time.Now().Add(t)
	}
	_ = ps.cn.nc.SetWriteDeadline(deadline)
	if _, err := ps.cn.nc.Write(buf); err != nil {
		ps.cn.nc.Close()
		return netErr(ctx, ps.cn.addr, true, err)
	}
	return nil
}

// Close unsubscribes by closing the connection and closes the message channel.
func (ps *PubSub) Close() error {
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		return nil
	}
	ps.closed = true
	close(ps.wake)
	ps.cn.nc.Close()
	ps.mu.Unlock()
	<-ps.exited
	return nil
}

func (ps *PubSub) readLoop(cn *conn) {
	defer close(ps.exited)
	defer close(ps.msgs)
	backoff := 50 * time.Millisecond
	for {
		_ = cn.nc.SetReadDeadline(time.Time{})
		v, err := readReply(cn.br)
		if err == nil {
			backoff = 50 * time.Millisecond
			if !ps.handle(v) {
				return
			}
			continue
		}
		cn.nc.Close()
		// Lost: reconnect until it works or Close is called.
		for {
			ps.mu.Lock()
			closed := ps.closed
			ps.mu.Unlock()
			if closed {
				return
			}
			ps.c.noteFailure(&NetError{Kind: ErrConnectionLost, Err: err})
			ctx, cancel := context.WithTimeout(context.Background(), ps.c.opts.DialTimeout)
			ncn, derr := ps.c.dialCurrent(ctx)
			cancel()
			if derr == nil {
				ps.mu.Lock()
				if ps.closed {
					ps.mu.Unlock()
					ncn.nc.Close()
					return
				}
				ps.cn = ncn
				var serr error
				if len(ps.channels) > 0 {
					serr = ps.send(context.Background(), "SUBSCRIBE", keys(ps.channels))
					ps.skip += len(ps.channels)
				}
				if serr == nil && len(ps.patterns) > 0 {
					serr = ps.send(context.Background(), "PSUBSCRIBE", keys(ps.patterns))
					ps.skip += len(ps.patterns)
				}
				ps.mu.Unlock()
				if serr == nil {
					cn = ncn
					break
				}
			}
			select {
			case <-ps.wake:
				return
			case <-time.After(backoff):
			}
			if backoff < 2*time.Second {
				backoff *= 2
			}
		}
	}
}

func keys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// handle sorts one value from a subscribed connection; false when the PubSub is closed while delivering.
func (ps *PubSub) handle(v any) bool {
	var items []any
	switch x := v.(type) {
	case Push:
		items = x
	case []any:
		items = x
	default:
		return true // a reply to something else (PING on RESP3): nothing to deliver
	}
	if len(items) == 0 {
		return true
	}
	kind, _ := items[0].(string)
	var m *Message
	switch kind {
	case "message":
		if len(items) == 3 {
			ch, _ := String(items[1], nil)
			p, _ := String(items[2], nil)
			m = &Message{Channel: ch, Payload: p}
		}
	case "pmessage":
		if len(items) == 4 {
			pat, _ := String(items[1], nil)
			ch, _ := String(items[2], nil)
			p, _ := String(items[3], nil)
			m = &Message{Pattern: pat, Channel: ch, Payload: p}
		}
	case "subscribe", "psubscribe":
		ps.mu.Lock()
		if ps.skip > 0 {
			ps.skip--
			ps.mu.Unlock()
			return true
		}
		ps.mu.Unlock()
		select {
		case ps.confirm <- struct{}{}:
		default:
		}
	}
	if m == nil {
		return true
	}
	select {
	case ps.msgs <- m:
		return true
	case <-ps.wake:
		return false
	}
}
