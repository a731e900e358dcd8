package ruvio

import (
	"context"
	"sync"
)

// pool keeps up to size connections to the current primary. get waits (bounded by its context) when all are in
// use. A connection goes back to the idle list only when healthy and opened in the current generation: a
// failover or a -READONLY bumps the generation, so connections to the old primary are closed as they come back.
type pool struct {
	opts   *Options
	addr   func(ctx context.Context) (string, error) // where to dial now
	slots  chan struct{}                             // one token per open-or-opening connection
	mu     sync.Mutex
	idle   []*conn
	gen    uint64
	closed bool
	done   chan struct{}
}

func newPool(opts *Options, addr func(ctx context.Context) (string, error)) *pool {
	return &pool{opts: opts, addr: addr, slots: make(chan struct{}, opts.PoolSize), done: make(chan struct{})}
}

func (p *pool) get(ctx context.Context) (*conn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-p.done:
		return nil, ErrClosed
	default:
		select {
		case p.slots <- struct{}{}:
		case <-p.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, netErr(ctx, "pool", false, ctx.Err())
		}
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.slots
			return nil, ErrClosed
		}
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		cn := p.idle[n-1]
		p.idle = p.idle[:n-1]
		gen := p.gen
		p.mu.Unlock()
		if cn.gen == gen && connCheck(cn.nc) == nil {
			return cn, nil
		}
		cn.close()
	}
	addr, err := p.addr(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	p.mu.Lock()
	gen := p.gen
	p.mu.Unlock()
	cn, err := dialConn(ctx, p.opts, addr)
	if err != nil {
		<-p.slots
		return nil, err
	}
	cn.gen = gen
	return cn, nil
}

func (p *pool) put(cn *conn) {
	p.mu.Lock()
	if cn.broken || p.closed || cn.gen != p.gen {
		p.mu.Unlock()
		cn.close()
	} else {
		p.idle = append(p.idle, cn)
		p.mu.Unlock()
	}
	<-p.slots
}

// reset starts a new generation: idle connections are closed now, busy ones when they come back.
func (p *pool) reset() {
	p.mu.Lock()
	p.gen++
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}

func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}

// stats for tests and monitoring.
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
