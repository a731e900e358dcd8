package ruvio

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// conn is one connection to a server. It is used by one goroutine at a time (the pool hands it out); a failure
// in the middle of a request marks it broken, since the reply stream can no longer be trusted to line up.
type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	wbuf   []byte
	addr   string
	proto  int
	gen    uint64 // the pool generation it was opened in (failover bumps it)
	broken bool
	exact  bool // decode replies keeping every RESP type apart (readExact); the conformance runner's view
}

var farPast = time.Unix(1, 0)

// dialConn connects to addr and runs the set-up commands the options ask for, all within DialTimeout and ctx.
func dialConn(ctx context.Context, o *Options, addr string) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	var nc net.Conn
	var err error
	if o.Dialer != nil {
		nc, err = o.Dialer(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		d.KeepAlive = 30 * time.Second
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		ne := netErr(ctx, addr, false, err)
		if ne.Kind != ErrTimeout {
			ne.Kind = ErrUnreachable
		}
		return nil, ne
	}
	if o.TLSConfig != nil {
		cfg := o.TLSConfig.Clone()
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			ne := netErr(ctx, addr, false, err)
			if ne.Kind != ErrTimeout {
				ne.Kind = ErrUnreachable
			}
			return nil, ne
		}
		nc = tc
	}
	cn := &conn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), addr: addr, proto: 2}
	if err := cn.handshake(ctx, o); err != nil {
		cn.close()
		var ne *NetError
		if errors.As(err, &ne) {
			// The caller's command was never sent: only the set-up failed.
			ne.Sent = false
			if ne.Kind == ErrConnectionLost {
				ne.Kind = ErrUnreachable
			}
		}
		return nil, err
	}
	return cn, nil
}

// handshake: HELLO 3 (with AUTH and SETNAME) unless RESP2 is asked for, falling back to RESP2 when the server
// refuses it; then SELECT and CLIENT DURABILITY when asked for.
func (cn *conn) handshake(ctx context.Context, o *Options) error {
	var cmds [][]any
	resp3 := o.Protocol != 2
	if resp3 {
		hello := []any{"HELLO", "3"}
		if o.Password != "" {
			user := o.Username
			if user == "" {
				user = "default"
			}
			hello = append(hello, "AUTH", user, o.Password)
		}
		if o.ClientName != "" {
			hello = append(hello, "SETNAME", o.ClientName)
		}
		replies, err := cn.roundTrip(ctx, [][]any{hello}, 0)
		if err != nil {
			return err
		}
		if e, ok := replies[0].(*Error); ok {
			if o.Protocol == 3 || e.Code == "WRONGPASS" || e.Code == "NOAUTH" && o.Password != "" {
				return e
			}
			resp3 = false // an older server or one that refuses RESP3: RESP2 from here
		} else {
			cn.proto = 3
		}
	}
	if !resp3 {
		if o.Password != "" {
			if o.Username != "" {
				cmds = append(cmds, []any{"AUTH", o.Username, o.Password})
			} else {
				cmds = append(cmds, []any{"AUTH", o.Password})
			}
		}
		if o.ClientName != "" {
			cmds = append(cmds, []any{"CLIENT", "SETNAME", o.ClientName})
		}
	}
	if o.DB != 0 {
		cmds = append(cmds, []any{"SELECT", o.DB})
	}
	if o.DurableReplicas > 0 {
		cmds = append(cmds, []any{"CLIENT", "DURABILITY", "REPLICAS", o.DurableReplicas})
	}
	if len(cmds) == 0 {
		return nil
	}
	replies, err := cn.roundTrip(ctx, cmds, 0)
	if err != nil {
		return err
	}
	for i, r := range replies {
		if e, ok := r.(*Error); ok {
			step := fmt.Sprint(cmds[i][0]) // (never the arguments: AUTH carries the password)
			if step == "CLIENT" {
				step += " " + fmt.Sprint(cmds[i][1])
			}
			return fmt.Errorf("ruvio: connection set-up %s: %w", step, e)
		}
	}
	return nil
}

func (cn *conn) close() {
	cn.broken = true
	cn.nc.Close()
}

// roundTrip sends cmds in one write and reads one reply for each. The time it may take is bounded by ctx and
// by timeout (when above 0); cancelling ctx interrupts it. Error replies come back as *Error values; the error
// result is a *NetError or a protocol error, after which the connection is broken.
func (cn *conn) roundTrip(ctx context.Context, cmds [][]any, timeout time.Duration) ([]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, netErr(ctx, cn.addr, false, err)
	}
	buf := cn.wbuf[:0]
	for _, c := range cmds {
		var err error
		if buf, err = appendCommand(buf, c); err != nil {
			return nil, err
		}
	}
	cn.wbuf = buf
	if cap(cn.wbuf) > 1<<20 {
		cn.wbuf = nil // do not keep a huge buffer around
	}

	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	if err := cn.nc.SetDeadline(deadline); err != nil {
		cn.close()
		return nil, netErr(ctx, cn.addr, false, err)
	}
	stop := func() bool { return true }
	if ctx.Done() != nil {
		// Cancellation interrupts blocked I/O by moving the deadline into the past.
		stop = context.AfterFunc(ctx, func() { _ = cn.nc.SetDeadline(farPast) })
	}
	replies, sent, err := cn.exchange(buf, len(cmds))
	if !stop() && err == nil {
		// The context ended just as we finished and may have poisoned the deadline: keep the answers, drop the
		// connection.
		cn.close()
	}
	if err != nil {
		cn.close()
		var pe *ProtocolError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, netErr(ctx, cn.addr, sent, err)
	}
	return replies, nil
}

func (cn *conn) exchange(buf []byte, n int) ([]any, bool, error) {
	if _, err := cn.nc.Write(buf); err != nil {
		return nil, true, err
	}
	replies := make([]any, 0, n)
	for len(replies) < n {
		v, err := readValue(cn.br, 0, cn.exact)
		if err != nil {
			return nil, true, noEOF(err)
		}
		if _, isPush := v.(Push); isPush {
			continue // out-of-band (client tracking, a stray message): not an answer to our commands
		}
		replies = append(replies, v)
	}
	return replies, true, nil
}
