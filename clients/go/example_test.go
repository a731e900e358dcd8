package ruvio_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	ruvio "github.com/ruvio/ruvio/clients/go"
)

// The examples read the server's address from RUVIO_ADDR, as a program would read its configuration (the test
// run points it at a ruvio it started); empty means the default, 127.0.0.1:6379.

// Take a lock, do the work, release it.
func ExampleClient_Lease() {
	ctx := context.Background()
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: os.Getenv("RUVIO_ADDR")})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	token, ok, err := c.Lease(ctx, "example:report", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("held:", ok, "token > 0:", token > 0)

	_, ok, _ = c.Lease(ctx, "example:report", 30*time.Second)
	fmt.Println("held by someone else, granted again:", ok)

	released, _ := c.Release(ctx, "example:report", token)
	fmt.Println("released:", released)
	released, _ = c.Release(ctx, "example:report", token)
	fmt.Println("released with a stale token:", released)
	// Output:
	// held: true token > 0: true
	// held by someone else, granted again: false
	// released: true
	// released with a stale token: false
}

// The lock helper renews in the background and closes Done when the lock is lost; pass Token to every write it
// protects.
func ExampleClient_Acquire() {
	ctx := context.Background()
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: os.Getenv("RUVIO_ADDR")})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	lock, ok, err := c.Acquire(ctx, "example:job", 10*time.Second,
		ruvio.WithWait(5*time.Second), ruvio.WithMaxHold(10*time.Minute))
	if err != nil {
		panic(err)
	}
	if !ok {
		return // someone else ran it
	}
	defer lock.Release(ctx)

	select {
	case <-lock.Done():
		fmt.Println("lost the lock:", lock.Err())
		return
	default:
	}
	// A fenced write: refused if a newer holder already wrote.
	wrote, err := c.IfGT(ctx, "example:job:result", lock.Token(), "done", 0)
	fmt.Println("wrote:", wrote, err)

	released, err := lock.Release(ctx)
	fmt.Println("released:", released, err, errors.Is(lock.Err(), ruvio.ErrLockReleased))
	// Output:
	// wrote: true <nil>
	// released: true <nil> true
}

// Any command, with replies as Go values.
func ExampleClient_Do() {
	ctx := context.Background()
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: os.Getenv("RUVIO_ADDR")})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	c.Do(ctx, "SET", "example:greeting", "hello", "EX", 60)
	v, err := ruvio.String(c.Do(ctx, "GET", "example:greeting"))
	fmt.Println(v, err)
	n, err := ruvio.Int64(c.Do(ctx, "INCRBY", "example:counter", 5))
	fmt.Println(n, err)
	missing, err := c.Do(ctx, "GET", "example:missing")
	fmt.Println(missing, err)
	_, err = c.Do(ctx, "INCR", "example:greeting")
	var se *ruvio.Error
	fmt.Println(errors.As(err, &se), se.Code)
	// Output:
	// hello <nil>
	// 5 <nil>
	// <nil> <nil>
	// true ERR
}

// Pipelines send many commands in one round trip; TxPipeline wraps them in MULTI/EXEC.
func ExampleClient_Pipeline() {
	ctx := context.Background()
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: os.Getenv("RUVIO_ADDR")})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	p := c.TxPipeline()
	p.Do("SET", "example:n", 10)
	p.Do("INCR", "example:n")
	results, err := p.Exec(ctx)
	fmt.Println(results[0].Val, results[1].Val, err)
	// Output: OK 11 <nil>
}

// Optimistic transactions: WATCH, read, then MULTI/EXEC; ErrTxAborted when the key changed meanwhile.
func ExampleClient_Watch() {
	ctx := context.Background()
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: os.Getenv("RUVIO_ADDR")})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Do(ctx, "SET", "example:balance", 100)

	err = c.Watch(ctx, func(tx *ruvio.Tx) error {
		balance, err := ruvio.Int64(tx.Do(ctx, "GET", "example:balance"))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, func(p *ruvio.Pipeline) {
			p.Do("SET", "example:balance", balance+10)
		})
		return err
	}, "example:balance")
	v, _ := ruvio.String(c.Do(ctx, "GET", "example:balance"))
	fmt.Println(v, err)
	// Output: 110 <nil>
}

// Pub/sub on its own connection; messages arrive on a channel.
func ExampleClient_Subscribe() {
	ctx := context.Background()
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: os.Getenv("RUVIO_ADDR")})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	sub, err := c.Subscribe(ctx, "example:news")
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	c.Publish(ctx, "example:news", "hello")
	msg := <-sub.Channel()
	fmt.Println(msg.Channel, msg.Payload)
	// Output: example:news hello
}

// Connection options from a URL.
func ExampleParseURL() {
	o, err := ruvio.ParseURL("rediss://worker:s3cret@db.example.com:6380/2?client_name=reports&command_timeout=2s")
	fmt.Println(o.Addr, o.Username, o.DB, o.ClientName, o.CommandTimeout, o.TLSConfig != nil, err)
	// Output: db.example.com:6380 worker 2 reports 2s true <nil>
}

// Errors: the server's code through errors.Is/As, and distinct kinds for timeouts and lost connections.
func ExampleNetError() {
	ctx := context.Background()
	_, err := ruvio.Connect(ctx, ruvio.Options{Addr: "127.0.0.1:1", DialTimeout: time.Second})
	fmt.Println(errors.Is(err, ruvio.ErrUnreachable), ruvio.FateUnknown(err))
	// Output: true false
}
