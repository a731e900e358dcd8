package ruvio

import (
	"runtime"
	"testing"
	"time"
)

// Close leaves no goroutine behind: pooled connections, a lock's renewal and loss timer, a subscription's
// reader, the Sentinel watcher are all gone.
func TestCloseLeaksNoGoroutines(t *testing.T) {
	s := startServer(t)
	st := startSentinelSetup(t)
	ctx := testCtx(t)
	before := runtime.NumGoroutine()

	c, err := Connect(ctx, Options{Addr: s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Acquire(ctx, "leak:lock", 3*time.Second); err != nil || !ok {
		t.Fatal(ok, err)
	}
	sub, err := c.Subscribe(ctx, "leak:chan")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pipeline()
	p.Do("PING")
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	sc, err := Connect(ctx, Options{SentinelAddrs: []string{st.sentinel.Addr()}, MasterName: "mymaster"})
	if err != nil {
		t.Fatal(err)
	}
	chk(sc.Do(ctx, "SET", "leak:k", "v"))(t)
	time.Sleep(1500 * time.Millisecond) // a renewal or two
	if runtime.NumGoroutine() <= before {
		t.Fatal("the test did not start any goroutine")
	}
	sub.Close()
	c.Close()
	sc.Close()
	goroutinesSettle(t, before)
}
