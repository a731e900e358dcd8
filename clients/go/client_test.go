package ruvio

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t testing.TB, o Options) *Client {
	t.Helper()
	c, err := Connect(testCtx(t), o)
	if err != nil {
		t.Fatalf("Connect(%+v): %v", o, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// chk(f())(t) is f's value, failing the test on f's error.
func chk[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

func TestDoAnyCommandRESP3AndRESP2(t *testing.T) {
	s := startServer(t)
	for _, proto := range []int{0, 2, 3} {
		t.Run(fmt.Sprintf("protocol=%d", proto), func(t *testing.T) {
			ctx := testCtx(t)
			c := connect(t, Options{Addr: s.Addr(), Protocol: proto})
			key := fmt.Sprintf("do:%d", proto)
			if v := chk(c.Do(ctx, "SET", key, "hello", "EX", 60))(t); v != "OK" {
				t.Fatalf("SET answered %#v", v)
			}
			if v := chk(c.Do(ctx, "GET", key))(t); v != "hello" {
				t.Fatalf("GET answered %#v", v)
			}
			if v := chk(c.Do(ctx, "GET", key+":missing"))(t); v != nil {
				t.Fatalf("GET of a missing key answered %#v, want nil", v)
			}
			if v := chk(c.Do(ctx, "INCRBY", key+":n", int64(1)<<40))(t); v != int64(1)<<40 {
				t.Fatalf("INCRBY answered %#v", v)
			}
			v := chk(c.Do(ctx, "MGET", key, key+":missing"))(t)
			if arr, ok := v.([]any); !ok || len(arr) != 2 || arr[0] != "hello" || arr[1] != nil {
				t.Fatalf("MGET answered %#v", v)
			}
			hello := chk(StringMap(c.Do(ctx, "HELLO")))(t)
			wantProto := int64(3)
			if proto == 2 {
				wantProto = 2
			}
			if hello["proto"] != wantProto || hello["server"] != "ruvio" {
				t.Fatalf("HELLO answered %#v, want proto %d", hello, wantProto)
			}
			// A map reply is a Go map in RESP3, a flat array in RESP2; StringMap reads both.
			raw := chk(c.Do(ctx, "CONFIG", "GET", "maxclients"))(t)
			if _, isMap := raw.(map[string]any); isMap != (wantProto == 3) {
				t.Fatalf("CONFIG GET reply %T with protocol %d", raw, wantProto)
			}
			if m := chk(StringMap(raw, nil))(t); m["maxclients"] != "10000" {
				t.Fatalf("CONFIG GET maxclients: %#v", m)
			}
			// Error replies are *Error with the code.
			_, err := c.Do(ctx, "INCR", key)
			var se *Error
			if !errors.As(err, &se) || se.Code != "ERR" || !strings.Contains(se.Message, "not an integer") {
				t.Fatalf("INCR of a string: %v", err)
			}
			if !errors.Is(err, ErrGeneric) || errors.Is(err, ErrWrongType) {
				t.Fatalf("errors.Is with codes wrong for %v", err)
			}
			if _, err := c.Do(ctx); err == nil {
				t.Fatal("Do without a command must fail")
			}
			if _, err := c.Do(ctx, "SET", key, struct{}{}); err == nil {
				t.Fatal("an argument of an unsupported type must fail")
			}
		})
	}
}

func TestTypedHelpersAndConverters(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "h:a", "v", 0); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := c.Get(ctx, "h:a"); err != nil || !ok || v != "v" {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	if v, ok, err := c.Get(ctx, "h:none"); err != nil || ok || v != "" {
		t.Fatalf("Get of a missing key = %q %v %v", v, ok, err)
	}
	if err := c.Set(ctx, "h:ttl", []byte("bytes"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl := chk(Int64(c.Do(ctx, "PTTL", "h:ttl")))(t); pttl <= 0 || pttl > 30000 {
		t.Fatalf("PTTL after Set with ttl: %d", pttl)
	}
	if n := chk(c.Incr(ctx, "h:n"))(t); n != 1 {
		t.Fatalf("Incr = %d", n)
	}
	if n := chk(c.Del(ctx, "h:a", "h:n", "h:none"))(t); n != 2 {
		t.Fatalf("Del = %d", n)
	}
	if _, err := String(c.Do(ctx, "GET", "h:none")); !errors.Is(err, ErrNil) {
		t.Fatalf("String of nil: %v", err)
	}
	if f := chk(Float64(c.Do(ctx, "INCRBYFLOAT", "h:f", 1.5)))(t); f != 1.5 {
		t.Fatalf("INCRBYFLOAT = %v", f)
	}
	if ss := chk(Strings(c.Do(ctx, "MGET", "h:f", "h:none")))(t); len(ss) != 2 || ss[0] != "1.5" || ss[1] != "" {
		t.Fatalf("Strings = %#v", ss)
	}
	if _, err := Int64("x", nil); err == nil {
		t.Fatal("Int64 of a non-number must fail")
	}
	if s := chk(String(big.NewInt(7), nil))(t); s != "7" {
		t.Fatal(s)
	}
	// Every argument kind the encoder takes.
	args := []any{"k", []byte("b"), 1, int8(2), int16(3), int32(4), int64(5), uint(6), uint8(7), uint16(8), uint32(9), uint64(10),
		float32(1.5), 2.25, true, false, 1500 * time.Millisecond, nil}
	want := []string{"k", "b", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "1.5", "2.25", "1", "0", "1500", ""}
	for i, a := range args {
		if got := chk(String(c.Do(ctx, "ECHO", a)))(t); got != want[i] {
			t.Fatalf("argument %#v was sent as %q, want %q", a, got, want[i])
		}
	}
}

func TestConnectionOptions(t *testing.T) {
	s := startServer(t, "--requirepass", "s3cret")
	ctx := testCtx(t)

	for _, proto := range []int{0, 2} {
		c := connect(t, Options{Addr: s.Addr(), Password: "s3cret", DB: 3, ClientName: "worker-7", Protocol: proto})
		// Each pooled connection is set up the same way: check on several at once.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				info, err := String(c.Do(ctx, "CLIENT", "INFO"))
				if err == nil && (!strings.Contains(info, "name=worker-7") || !strings.Contains(info, "db=3")) {
					err = fmt.Errorf("CLIENT INFO says %q", info)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("protocol %d: %v", proto, err)
			}
		}
		// Username "default" works too.
		connect(t, Options{Addr: s.Addr(), Username: "default", Password: "s3cret", Protocol: proto})
	}

	_, err := Connect(ctx, Options{Addr: s.Addr(), Password: "wrong"})
	if !errors.Is(err, ErrWrongPass) {
		t.Fatalf("a wrong password: %v, want WRONGPASS", err)
	}
	_, err = Connect(ctx, Options{Addr: s.Addr(), Password: "wrong", Protocol: 2})
	if !errors.Is(err, ErrWrongPass) {
		t.Fatalf("a wrong password over RESP2: %v, want WRONGPASS", err)
	}
	c := connect(t, Options{Addr: s.Addr(), Protocol: 2}) // no password: the first command is refused
	if _, err := c.Do(ctx, "GET", "x"); !errors.Is(err, ErrNoAuth) {
		t.Fatalf("without a password: %v", err)
	}

	u, err := ConnectURL(ctx, "redis://default:s3cret@"+s.Addr()+"/2?client_name=from-url&protocol=2&command_timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	info := chk(String(u.Do(ctx, "CLIENT", "INFO")))(t)
	if !strings.Contains(info, "name=from-url") || !strings.Contains(info, "db=2") || !strings.Contains(info, "resp=2") {
		t.Fatalf("URL options not applied: %s", info)
	}
	if o := u.Options(); o.CommandTimeout != 3*time.Second || o.Protocol != 2 {
		t.Fatalf("URL options: %+v", o)
	}
}

func TestParseURL(t *testing.T) {
	o, err := ParseURL("rediss://u:p@example.com:7000/5?dial_timeout=2s&pool_size=3&durable_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "example.com:7000" || o.Username != "u" || o.Password != "p" || o.DB != 5 || o.DialTimeout != 2*time.Second ||
		o.PoolSize != 3 || o.DurableReplicas != 1 || o.TLSConfig == nil || o.TLSConfig.ServerName != "example.com" {
		t.Fatalf("%+v", o)
	}
	o, err = ParseURL("redis://localhost")
	if err != nil || o.Addr != "localhost:6379" || o.TLSConfig != nil || o.DB != 0 {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range []string{"http://x", "redis://x/abc", "redis://x?nope=1", "redis://x?protocol=4", "redis://x?dial_timeout=soon"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted", bad)
		}
	}
}

func TestUnreachableIsAnErrorNotAHang(t *testing.T) {
	port, err := freePort() // nothing listens there now
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Connect(context.Background(), Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DialTimeout: 2 * time.Second})
	if !errors.Is(err, ErrUnreachable) || FateUnknown(err) {
		t.Fatalf("connect to a closed port: %v", err)
	}
	var ne *NetError
	if !errors.As(err, &ne) || ne.Sent {
		t.Fatalf("not a NetError with Sent=false: %#v", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

// A paused server: commands time out (command timeout, or the context's deadline) instead of hanging, with
// ErrTimeout and "fate unknown"; the client works again once the server resumes.
func TestTimeoutsAgainstAPausedServer(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr(), CommandTimeout: 500 * time.Millisecond})
	chk(c.Do(ctx, "SET", "p:k", "v"))(t)
	s.pause()
	resumed := false
	defer func() {
		if !resumed {
			s.resume()
		}
	}()

	start := time.Now()
	_, err := c.Do(ctx, "GET", "p:k")
	if !errors.Is(err, ErrTimeout) || !FateUnknown(err) {
		t.Fatalf("GET on a paused server: %v", err)
	}
	var ne *NetError
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("not a timeout NetError: %#v", err)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("the command timeout of 500ms took %v", el)
	}

	// The context's deadline bounds a call too, when shorter than the command timeout.
	nolimit := Options{Addr: s.Addr(), CommandTimeout: -1, DialTimeout: time.Second}
	c2, err := Connect(ctx, nolimit)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("connecting to a paused server: %v", err)
	}
	_ = c2
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _, err = c.Lease(dctx, "p:lock", 10*time.Second)
	cancel()
	// (The pool has no live connection left, so this one failed while connecting: the LEASE was never sent.)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || FateUnknown(err) {
		t.Fatalf("LEASE with a context deadline on a paused server: %v", err)
	}

	s.resume()
	resumed = true
	if v := chk(c.Do(ctx, "GET", "p:k"))(t); v != "v" {
		t.Fatalf("after resume: %#v", v)
	}
}

func TestCancellationInterruptsTheInFlightCommand(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	holder, ok := chk2(c.Lease(ctx, "cancel:lock", 30*time.Second))(t)
	if !ok {
		t.Fatal("not granted")
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.LeaseWait(cctx, "cancel:lock", 30*time.Second, 0) // waits without a server-side timeout
		errc <- err
	}()
	// Wait until the server has the waiter queued, then cancel.
	waitFor(t, 10*time.Second, func() bool {
		info, _, err := c.LockInfo(ctx, "cancel:lock")
		return err == nil && info.Waiters == 1
	})
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || !FateUnknown(err) {
			t.Fatalf("cancelled LEASE WAIT: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the context did not interrupt the waiting command")
	}
	// The server drops the waiter whose connection closed: releasing grants nobody.
	waitFor(t, 10*time.Second, func() bool {
		info, _, err := c.LockInfo(ctx, "cancel:lock")
		return err == nil && info.Waiters == 0
	})
	if ok := chk(c.Release(ctx, "cancel:lock", holder))(t); !ok {
		t.Fatal("release failed")
	}
	if _, ok, _ := c.LockInfo(ctx, "cancel:lock"); ok {
		t.Fatal("the cancelled waiter was granted the lock")
	}
	// A context already done never sends.
	_, err := c.Do(cctx, "PING")
	if !errors.Is(err, context.Canceled) || FateUnknown(err) {
		t.Fatalf("Do with a done context: %v", err)
	}
}

// chk2(f())(t) is f's value and ok, failing the test on f's error.
func chk2[T any](v T, ok bool, err error) func(testing.TB) (T, bool) {
	return func(t testing.TB) (T, bool) {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v, ok
	}
}

func waitFor(t testing.TB, limit time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("condition not met within %v", limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReconnectAfterServerRestart(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	// Fill the pool with a few idle connections.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = c.Do(ctx, "SET", "r:k", "v") }()
	}
	wg.Wait()
	s.restart()
	// Idle connections to the old process are noticed and replaced: no command fails.
	for i := 0; i < 10; i++ {
		if v := chk(c.Do(ctx, "GET", "r:k"))(t); v != "v" {
			t.Fatalf("after restart: %#v (the append-only log keeps the key)", v)
		}
	}
}

func TestPoolIsSafeForConcurrentGoroutines(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr(), PoolSize: 4})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := c.Incr(ctx, "pool:n"); err != nil {
					failures.Add(1)
				}
				if v, err := String(c.Do(ctx, "ECHO", fmt.Sprintf("%d-%d", g, i))); err != nil || v != fmt.Sprintf("%d-%d", g, i) {
					failures.Add(1)
				}
			}
		}(g)
	}
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d failures", failures.Load())
	}
	if n := chk(Int64(c.Do(ctx, "GET", "pool:n")))(t); n != 32*50 {
		t.Fatalf("INCR count %d", n)
	}
	if idle := c.pool.idleCount(); idle > 4 {
		t.Fatalf("pool of 4 keeps %d idle connections", idle)
	}
	clients := chk(String(c.Do(ctx, "CLIENT", "LIST")))(t)
	// (One more is tolerated: the helper's readiness probe may still be listed while the server closes it.)
	if n := strings.Count(clients, "\n"); n > 5 {
		t.Fatalf("%d connections open for a pool of 4:\n%s", n, clients)
	}

	// All connections busy: a caller waits for one, bounded by its context.
	one := connect(t, Options{Addr: s.Addr(), PoolSize: 1})
	holder, _ := chk2(one.Lease(ctx, "pool:lock", 30*time.Second))(t)
	go func() { _, _, _ = one.LeaseWait(ctx, "pool:lock", time.Second, 3*time.Second) }() // occupies the only connection
	waitFor(t, 10*time.Second, func() bool {
		info, _, err := c.LockInfo(ctx, "pool:lock")
		return err == nil && info.Waiters == 1
	})
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := one.Do(short, "PING")
	cancel()
	if !errors.Is(err, ErrTimeout) || FateUnknown(err) {
		t.Fatalf("waiting for a pooled connection: %v", err)
	}
	_, _ = c.Release(ctx, "pool:lock", holder)
}

func TestDurabilityOptionIsSentAndItsErrorSurfaced(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c, err := Connect(ctx, Options{Addr: s.Addr(), DurableReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The option went out as CLIENT DURABILITY REPLICAS 1; this server has no replica, so a write that needs one is
	// refused before it runs, with the server's own error.
	_, _, err = c.Lease(ctx, "durable-"+t.Name(), time.Second)
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "NOREPLICAS") {
		t.Fatalf("a durable write without replicas should surface NOREPLICAS, got %v", err)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c, err := Connect(ctx, Options{Addr: s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	l, ok, err := c.Acquire(ctx, "close:lock", 10*time.Second)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	c.Close()
	select {
	case <-l.Done():
	default:
		t.Fatal("Close did not end the lock")
	}
	if !errors.Is(l.Err(), ErrLockReleased) {
		t.Fatalf("lock after Close: %v", l.Err())
	}
	if _, err := c.Do(ctx, "PING"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
	other := connect(t, Options{Addr: s.Addr()})
	if _, held, _ := other.LockInfo(ctx, "close:lock"); held {
		t.Fatal("Close did not release the lock")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// An idle pooled connection stays in use after its last command's deadline has passed (the health check must not
// mistake the old deadline for a dead connection).
func TestIdleConnectionIsReusedAfterItsDeadline(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr(), CommandTimeout: 100 * time.Millisecond, PoolSize: 1})
	id1 := chk(Int64(c.Do(ctx, "CLIENT", "ID")))(t)
	time.Sleep(300 * time.Millisecond)
	id2 := chk(Int64(c.Do(ctx, "CLIENT", "ID")))(t)
	if id1 != id2 {
		t.Fatalf("the idle connection was replaced (CLIENT ID %d, then %d)", id1, id2)
	}
	// Likewise after a call whose context had a deadline.
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	chk(c.Do(dctx, "PING"))(t)
	cancel()
	time.Sleep(200 * time.Millisecond)
	if id3 := chk(Int64(c.Do(ctx, "CLIENT", "ID")))(t); id3 != id1 {
		t.Fatalf("the connection was replaced after a context deadline passed (%d, then %d)", id1, id3)
	}
}
