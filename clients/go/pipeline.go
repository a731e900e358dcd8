package ruvio

import (
	"context"
	"errors"
	"fmt"
)

// Result is the outcome of one command of a pipeline or transaction: its reply, or its error (a *Error for an
// error reply).
type Result struct {
	Val any
	Err error
}

// Pipeline queues commands and sends them in one write, reading all replies in one go, on one connection.
// A Pipeline is not safe for concurrent use; make one per goroutine (the Client is).
//
//	p := c.Pipeline()
//	p.Do("SET", "a", "1")
//	p.Do("INCR", "a")
//	res, err := p.Exec(ctx) // res[1].Val == int64(2)
type Pipeline struct {
	c    *Client
	tx   bool
	cmds [][]any
}

// Pipeline returns an empty pipeline.
func (c *Client) Pipeline() *Pipeline { return &Pipeline{c: c} }

// TxPipeline returns an empty pipeline whose commands run as one MULTI/EXEC transaction.
func (c *Client) TxPipeline() *Pipeline { return &Pipeline{c: c, tx: true} }

// Do queues a command.
func (p *Pipeline) Do(args ...any) { p.cmds = append(p.cmds, args) }

// Len is the number of queued commands.
func (p *Pipeline) Len() int { return len(p.cmds) }

// Exec sends the queued commands, empties the pipeline and returns one Result per command. err is the first
// failure: a network error (every Result then carries it), or the first command's error reply. For a
// TxPipeline, ErrTxAborted (WATCH fired, nothing ran) or an EXECABORT error (a command was rejected when
// queued, nothing ran).
func (p *Pipeline) Exec(ctx context.Context) ([]Result, error) {
	cmds := p.cmds
	p.cmds = nil
	if len(cmds) == 0 {
		return nil, nil
	}
	cn, err := p.c.pool.get(ctx)
	if err != nil {
		p.c.noteFailure(err)
		return failAll(len(cmds), err), err
	}
	defer p.c.pool.put(cn)
	if p.tx {
		return p.c.execTx(ctx, cn, cmds)
	}
	return p.c.execPipeline(ctx, cn, cmds)
}

func failAll(n int, err error) []Result {
	out := make([]Result, n)
	for i := range out {
		out[i].Err = err
	}
	return out
}

func (c *Client) execPipeline(ctx context.Context, cn *conn, cmds [][]any) ([]Result, error) {
	replies, err := cn.roundTrip(ctx, cmds, c.timeout(0))
	if err != nil {
		c.noteFailure(err)
		return failAll(len(cmds), err), err
	}
	out := make([]Result, len(cmds))
	var first error
	for i, r := range replies {
		c.noteReply(r)
		if e, ok := r.(*Error); ok {
			out[i].Err = e
			if first == nil {
				first = e
			}
		} else {
			out[i].Val = r
		}
	}
	return out, first
}

func (c *Client) execTx(ctx context.Context, cn *conn, cmds [][]any) ([]Result, error) {
	all := make([][]any, 0, len(cmds)+2)
	all = append(all, []any{"MULTI"})
	all = append(all, cmds...)
	all = append(all, []any{"EXEC"})
	replies, err := cn.roundTrip(ctx, all, c.timeout(0))
	if err != nil {
		c.noteFailure(err)
		return failAll(len(cmds), err), err
	}
	for _, r := range replies {
		c.noteReply(r)
	}
	if e, ok := replies[0].(*Error); ok {
		return failAll(len(cmds), e), e
	}
	out := make([]Result, len(cmds))
	queued := replies[1 : len(replies)-1]
	for i, q := range queued {
		if e, ok := q.(*Error); ok {
			out[i].Err = e
		}
	}
	switch x := replies[len(replies)-1].(type) {
	case nil:
		return failAll(len(cmds), ErrTxAborted), ErrTxAborted
	case *Error:
		for i := range out {
			if out[i].Err == nil {
				out[i].Err = x
			}
		}
		return out, x
	case []any:
		if len(x) != len(cmds) {
			return failAll(len(cmds), fmt.Errorf("ruvio: EXEC answered %d replies for %d commands", len(x), len(cmds))), errors.New("ruvio: bad EXEC reply")
		}
		var first error
		for i, r := range x {
			if e, ok := r.(*Error); ok {
				out[i].Err = e
				if first == nil {
					first = e
				}
			} else {
				out[i].Val = r
			}
		}
		return out, first
	default:
		err := fmt.Errorf("ruvio: unexpected EXEC reply %T", x)
		return failAll(len(cmds), err), err
	}
}

// Tx is a connection reserved for an optimistic transaction, inside [Client.Watch].
type Tx struct {
	c  *Client
	cn *conn
}

// Watch reserves one connection, sends WATCH keys, and calls fn with it. In fn, read with tx.Do and write with
// tx.Exec, which runs its commands in MULTI/EXEC and fails with ErrTxAborted if a watched key changed
// meanwhile (then nothing ran: read again and retry, as the caller sees fit). Watches end with Watch.
//
//	err := c.Watch(ctx, func(tx *ruvio.Tx) error {
//		n, err := ruvio.Int64(tx.Do(ctx, "GET", "balance"))
//		if err != nil { return err }
//		_, err = tx.Exec(ctx, func(p *ruvio.Pipeline) { p.Do("SET", "balance", n+10) })
//		return err
//	}, "balance")
func (c *Client) Watch(ctx context.Context, fn func(tx *Tx) error, keys ...string) error {
	if len(keys) == 0 {
		return errors.New("ruvio: Watch needs at least one key")
	}
	cn, err := c.pool.get(ctx)
	if err != nil {
		c.noteFailure(err)
		return err
	}
	defer c.pool.put(cn)
	args := []any{"WATCH"}
	for _, k := range keys {
		args = append(args, k)
	}
	tx := &Tx{c: c, cn: cn}
	if _, err := tx.Do(ctx, args...); err != nil {
		return err
	}
	err = fn(tx)
	if !cn.broken {
		if _, uerr := cn.roundTrip(ctx, [][]any{{"UNWATCH"}}, c.timeout(0)); uerr != nil && err == nil {
			// The work is done; only the clean-up failed, and the connection is closed by it.
			_ = uerr
		}
	}
	return err
}

// Do runs a command on the transaction's connection right away (reads between WATCH and EXEC).
func (tx *Tx) Do(ctx context.Context, args ...any) (any, error) {
	replies, err := tx.cn.roundTrip(ctx, [][]any{args}, tx.c.timeout(0))
	if err != nil {
		tx.c.noteFailure(err)
		return nil, err
	}
	tx.c.noteReply(replies[0])
	if e, ok := replies[0].(*Error); ok {
		return nil, e
	}
	return replies[0], nil
}

// Exec runs the commands fn queues as one MULTI/EXEC transaction on the watched connection. It returns
// ErrTxAborted when a watched key changed since WATCH (nothing ran).
func (tx *Tx) Exec(ctx context.Context, fn func(p *Pipeline)) ([]Result, error) {
	p := &Pipeline{c: tx.c, tx: true}
	fn(p)
	if len(p.cmds) == 0 {
		return nil, nil
	}
	return tx.c.execTx(ctx, tx.cn, p.cmds)
}
