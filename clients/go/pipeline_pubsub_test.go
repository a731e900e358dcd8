package ruvio

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPipelineAndTransactions(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	for _, proto := range []int{2, 3} {
		c := connect(t, Options{Addr: s.Addr(), Protocol: proto})
		other := connect(t, Options{Addr: s.Addr(), Protocol: proto})
		k := fmt.Sprintf("pl%d:", proto)

		p := c.Pipeline()
		for i := 0; i < 100; i++ {
			p.Do("INCR", k+"n")
		}
		p.Do("GET", k+"n")
		p.Do("LEASE", k+"n", 1000) // WRONGTYPE, in place
		if p.Len() != 102 {
			t.Fatal(p.Len())
		}
		res, err := p.Exec(ctx)
		if !errors.Is(err, ErrWrongType) || len(res) != 102 || res[99].Val != int64(100) || res[100].Val != "100" ||
			!errors.Is(res[101].Err, ErrWrongType) || res[0].Err != nil {
			t.Fatalf("pipeline: %v %+v", err, res[99:])
		}
		if p.Len() != 0 {
			t.Fatal("Exec must empty the pipeline")
		}
		if res, err := p.Exec(ctx); res != nil || err != nil {
			t.Fatal("an empty pipeline")
		}

		// MULTI/EXEC: a runtime error is one element; the others ran.
		tx := c.TxPipeline()
		tx.Do("SET", k+"a", "x")
		tx.Do("INCR", k+"a")
		tx.Do("GET", k+"a")
		res, err = tx.Exec(ctx)
		if err == nil || res[0].Val != "OK" || res[1].Err == nil || res[2].Val != "x" {
			t.Fatalf("tx: %v %+v", err, res)
		}
		// A command rejected when queued aborts the whole transaction (EXECABORT).
		tx.Do("SET", k+"b", "1")
		tx.Do("NOSUCHCOMMAND")
		res, err = tx.Exec(ctx)
		if !errors.Is(err, ErrExecAbort) || res[1].Err == nil || !errors.Is(res[0].Err, ErrExecAbort) {
			t.Fatalf("EXECABORT: %v %+v", err, res)
		}
		if v, ok, _ := c.Get(ctx, k+"b"); ok {
			t.Fatalf("an aborted transaction wrote %q", v)
		}

		// WATCH: a change by another client between WATCH and EXEC aborts; nothing runs.
		chk(c.Do(ctx, "SET", k+"bal", 100))(t)
		err = c.Watch(ctx, func(tx *Tx) error {
			bal, err := Int64(tx.Do(ctx, "GET", k+"bal"))
			if err != nil {
				return err
			}
			chk(other.Do(ctx, "SET", k+"bal", 500))(t)
			_, err = tx.Exec(ctx, func(p *Pipeline) { p.Do("SET", k+"bal", bal+10) })
			return err
		}, k+"bal")
		if !errors.Is(err, ErrTxAborted) {
			t.Fatalf("Watch after a concurrent change: %v", err)
		}
		if v, _, _ := c.Get(ctx, k+"bal"); v != "500" {
			t.Fatalf("balance %s", v)
		}
		// Unchanged: it commits.
		err = c.Watch(ctx, func(tx *Tx) error {
			bal, err := Int64(tx.Do(ctx, "GET", k+"bal"))
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, func(p *Pipeline) { p.Do("SET", k+"bal", bal+10) })
			return err
		}, k+"bal")
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := c.Get(ctx, k+"bal"); v != "510" {
			t.Fatalf("balance %s", v)
		}
		if err := c.Watch(ctx, func(*Tx) error { return nil }); err == nil {
			t.Fatal("Watch without keys")
		}
		// Lock commands inside a transaction never wait.
		tok, _ := chk2(c.Lease(ctx, k+"lock", 30*time.Second))(t)
		tx.Do("LEASE", k+"lock", 1000, "WAIT", 5000)
		tx.Do("RELEASE", k+"lock", tok)
		res, err = tx.Exec(ctx)
		if err != nil || res[0].Val != nil || res[1].Val != int64(1) {
			t.Fatalf("locks in a transaction: %v %+v", err, res)
		}
	}
}

func TestPubSub(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	for _, proto := range []int{2, 3} {
		c := connect(t, Options{Addr: s.Addr(), Protocol: proto})
		ch := fmt.Sprintf("news%d", proto)
		sub, err := c.Subscribe(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		if n := chk(c.Publish(ctx, ch, "hello"))(t); n != 1 {
			t.Fatalf("PUBLISH reached %d", n)
		}
		expectMsg(t, sub, Message{Channel: ch, Payload: "hello"})
		if err := sub.PSubscribe(ctx, fmt.Sprintf("n*%d", proto)); err != nil {
			t.Fatal(err)
		}
		if n := chk(c.Publish(ctx, ch, "both"))(t); n != 2 {
			t.Fatalf("PUBLISH reached %d", n)
		}
		got := []*Message{recvMsg(t, sub), recvMsg(t, sub)}
		patterns := got[0].Pattern + got[1].Pattern
		if patterns != fmt.Sprintf("n*%d", proto) || got[0].Payload != "both" || got[1].Payload != "both" {
			t.Fatalf("messages %+v %+v", got[0], got[1])
		}
		if err := sub.Unsubscribe(ctx, ch); err != nil {
			t.Fatal(err)
		}
		if err := sub.PUnsubscribe(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool {
			n, err := c.Publish(ctx, ch, "nobody")
			return err == nil && n == 0
		})
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		if _, open := <-sub.Channel(); open {
			t.Fatal("Channel open after Close")
		}
		if err := sub.Subscribe(ctx, "x"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Subscribe after Close: %v", err)
		}
		// Patterns from the start.
		psub, err := c.PSubscribe(ctx, "ev:*")
		if err != nil {
			t.Fatal(err)
		}
		chk(c.Publish(ctx, "ev:1", "x"))(t)
		expectMsg(t, psub, Message{Channel: "ev:1", Pattern: "ev:*", Payload: "x"})
		psub.Close()
	}
}

func recvMsg(t *testing.T, sub *PubSub) *Message {
	t.Helper()
	select {
	case m, ok := <-sub.Channel():
		if !ok {
			t.Fatal("channel closed")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
	}
	return nil
}

func expectMsg(t *testing.T, sub *PubSub, want Message) {
	t.Helper()
	if m := recvMsg(t, sub); *m != want {
		t.Fatalf("message %+v, want %+v", *m, want)
	}
}

func TestPubSubResubscribesAfterARestart(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	sub, err := c.Subscribe(ctx, "rs:chan")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.PSubscribe(ctx, "rs:p*"); err != nil {
		t.Fatal(err)
	}
	s.restart()
	// Once re-subscribed, publishing reaches both subscriptions again.
	waitFor(t, 20*time.Second, func() bool {
		n, err := c.Publish(ctx, "rs:chan", "probe")
		return err == nil && n == 1
	})
	waitFor(t, 20*time.Second, func() bool {
		n, err := c.Publish(ctx, "rs:pat", "probe")
		return err == nil && n == 1
	})
	chk(c.Publish(ctx, "rs:chan", "after"))(t)
	for {
		m := recvMsg(t, sub)
		if m.Payload == "after" {
			break
		}
		if m.Payload != "probe" || !strings.HasPrefix(m.Channel, "rs:") {
			t.Fatalf("unexpected %+v", m)
		}
	}
}
