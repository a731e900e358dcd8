package ruvio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// discovery finds the primary through the Sentinel protocol (Redis Sentinel, or Ruvio's coordinator, which
// speaks the same): SENTINEL get-master-addr-by-name, then ROLE on the candidate to confirm it is a primary.
// The answer is cached until invalidated (-READONLY, a lost connection, an unreachable server) or replaced by a
// +switch-master event from the watcher goroutine.
type discovery struct {
	opts     *Options
	onChange func() // called when the primary changes or is forgotten (resets the pool)

	findMu sync.Mutex // one discovery at a time
	mu     sync.Mutex
	addr   string // the known primary; "" = look again
	order  []string

	stopped  chan struct{}
	watchWG  sync.WaitGroup
	watchCn  *conn
	stopOnce sync.Once
}

func newDiscovery(o *Options) *discovery {
	return &discovery{opts: o, order: append([]string(nil), o.SentinelAddrs...), stopped: make(chan struct{})}
}

func (d *discovery) current() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr
}

// primary returns the primary's address, asking the sentinels if it is not known.
func (d *discovery) primary(ctx context.Context) (string, error) {
	if a := d.current(); a != "" {
		return a, nil
	}
	d.findMu.Lock()
	defer d.findMu.Unlock()
	if a := d.current(); a != "" {
		return a, nil
	}
	addr, err := d.find(ctx)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.addr = addr
	d.mu.Unlock()
	return addr, nil
}

// invalidate forgets the primary: the next connection asks the sentinels again, and idle connections are dropped.
func (d *discovery) invalidate() {
	d.mu.Lock()
	changed := d.addr != ""
	d.addr = ""
	d.mu.Unlock()
	if changed && d.onChange != nil {
		d.onChange()
	}
}

func (d *discovery) set(addr string) {
	d.mu.Lock()
	changed := d.addr != addr
	d.addr = addr
	d.mu.Unlock()
	if changed && d.onChange != nil {
		d.onChange()
	}
}

func (d *discovery) sentinelOptions() *Options {
	return &Options{
		Username: d.opts.SentinelUsername, Password: d.opts.SentinelPassword, Protocol: 2,
		DialTimeout: d.opts.DialTimeout, TLSConfig: d.opts.TLSConfig, Dialer: d.opts.Dialer,
	}
}

func (d *discovery) find(ctx context.Context) (string, error) {
	d.mu.Lock()
	order := append([]string(nil), d.order...)
	d.mu.Unlock()
	var errs []error
	for i, s := range order {
		addr, err := d.ask(ctx, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("sentinel %s: %w", s, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if i > 0 { // the one that answered goes first next time
			d.mu.Lock()
			d.order = append([]string{s}, append(order[:i:i], order[i+1:]...)...)
			d.mu.Unlock()
		}
		return addr, nil
	}
	return "", &NetError{Kind: ErrUnreachable, Addr: strings.Join(order, ","),
		Err: fmt.Errorf("no sentinel named a primary for %q: %w", d.opts.MasterName, errors.Join(errs...))}
}

// ask one sentinel for the primary and confirm it with ROLE.
func (d *discovery) ask(ctx context.Context, sentinel string) (string, error) {
	so := d.sentinelOptions()
	cn, err := dialConn(ctx, so, sentinel)
	if err != nil {
		return "", err
	}
	replies, err := cn.roundTrip(ctx, [][]any{{"SENTINEL", "get-master-addr-by-name", d.opts.MasterName}}, d.opts.DialTimeout)
	cn.close()
	if err != nil {
		return "", err
	}
	hp, ok := replies[0].([]any)
	if !ok || len(hp) != 2 {
		if e, isErr := replies[0].(*Error); isErr {
			return "", e
		}
		return "", fmt.Errorf("no primary known for %q", d.opts.MasterName)
	}
	host, _ := String(hp[0], nil)
	port, _ := String(hp[1], nil)
	addr := net.JoinHostPort(host, port)

	// Confirm: the candidate must say it is a primary (a sentinel may lag behind a failover).
	check := *d.opts
	check.DB, check.DurableReplicas, check.ClientName = 0, 0, ""
	pc, err := dialConn(ctx, &check, addr)
	if err != nil {
		return "", err
	}
	defer pc.close()
	replies, err = pc.roundTrip(ctx, [][]any{{"ROLE"}}, d.opts.DialTimeout)
	if err != nil {
		return "", err
	}
	switch r := replies[0].(type) {
	case []any:
		if len(r) == 0 {
			return "", fmt.Errorf("%s answered ROLE with an empty array", addr)
		}
		if role, _ := String(r[0], nil); role != "master" {
			return "", fmt.Errorf("%s says it is a %s, not the primary", addr, role)
		}
	case *Error:
		if !strings.Contains(strings.ToLower(r.Message), "unknown command") {
			return "", r
		}
		// A server without ROLE: take the sentinel's word.
	}
	return addr, nil
}

// watch subscribes to +switch-master on the sentinels (reconnecting as needed) until stop.
func (d *discovery) watch() {
	d.watchWG.Add(1)
	go func() {
		defer d.watchWG.Done()
		backoff := 100 * time.Millisecond
		for i := 0; ; i++ {
			select {
			case <-d.stopped:
				return
			default:
			}
			d.mu.Lock()
			order := append([]string(nil), d.order...)
			d.mu.Unlock()
			s := order[i%len(order)]
			if d.listen(s) {
				backoff = 100 * time.Millisecond
			}
			select {
			case <-d.stopped:
				return
			case <-time.After(backoff):
			}
			if backoff < 2*time.Second {
				backoff *= 2
			}
		}
	}()
}

// listen follows one sentinel's +switch-master events until its connection ends; true if it subscribed.
func (d *discovery) listen(sentinel string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.DialTimeout)
	cn, err := dialConn(ctx, d.sentinelOptions(), sentinel)
	if err == nil {
		_, err = cn.roundTrip(ctx, [][]any{{"SUBSCRIBE", "+switch-master"}}, 0)
		if err != nil {
			cn.close()
		}
	}
	cancel()
	if err != nil {
		return false
	}
	d.mu.Lock()
	select {
	case <-d.stopped:
		d.mu.Unlock()
		cn.close()
		return true
	default:
	}
	d.watchCn = cn
	d.mu.Unlock()
	_ = cn.nc.SetDeadline(time.Time{})
	for {
		v, err := readReply(cn.br)
		if err != nil {
			cn.nc.Close()
			return true
		}
		items, ok := v.([]any)
		if !ok || len(items) != 3 {
			continue
		}
		if kind, _ := String(items[0], nil); kind != "message" {
			continue
		}
		payload, _ := String(items[2], nil)
		// "<name> <old-ip> <old-port> <new-ip> <new-port>"
		f := strings.Fields(payload)
		if len(f) == 5 && f[0] == d.opts.MasterName {
			d.set(net.JoinHostPort(f[3], f[4]))
		}
	}
}

func (d *discovery) stop() {
	d.stopOnce.Do(func() {
		d.mu.Lock()
		close(d.stopped)
		if d.watchCn != nil {
			d.watchCn.nc.Close()
		}
		d.mu.Unlock()
		d.watchWG.Wait()
	})
}
