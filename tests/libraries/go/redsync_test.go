// go-redsync's normal flows (Lock, Extend, Unlock, TryLock, contention) against ruvio, unchanged: the library
// runs its own Lua scripts. LIBRARY_TARGET=redis runs the same tests against redis-server.
package redsyncproof

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

func target() string {
	if t := os.Getenv("LIBRARY_TARGET"); t != "" {
		return t
	}
	return "ruvio"
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts ruvio ($RUVIO_BIN, required) or redis-server on a free port with a fresh data folder.
func startServer(t *testing.T) *goredislib.Client {
	t.Helper()
	port := freePort(t)
	dir := t.TempDir()
	var cmd *exec.Cmd
	if target() == "redis" {
		cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--dir", dir, "--save", "", "--appendonly", "no")
	} else {
		bin := os.Getenv("RUVIO_BIN")
		if bin == "" {
			t.Fatal("RUVIO_BIN must name the ruvio binary")
		}
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("RUVIO_BIN: %v", err)
		}
		cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--dir", dir)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	client := goredislib.NewClient(&goredislib.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	t.Cleanup(func() { _ = client.Close() })
	deadline := time.Now().Add(15 * time.Second)
	for client.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start", target())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return client
}

func TestLockExtendUnlock(t *testing.T) {
	client := startServer(t)
	ctx := context.Background()
	rs := redsync.New(goredis.NewPool(client))
	m := rs.NewMutex("g:resource", redsync.WithExpiry(2*time.Second), redsync.WithTries(1))
	if err := m.Lock(); err != nil {
		t.Fatalf("lock: %v", err)
	}
	if v, _ := client.Get(ctx, "g:resource").Result(); v != m.Value() {
		t.Fatalf("stored %q, mutex value %q", v, m.Value())
	}
	other := rs.NewMutex("g:resource", redsync.WithTries(1))
	if err := other.TryLock(); err == nil {
		t.Fatal("a second mutex took a held lock")
	}
	ok, err := m.Extend()
	if err != nil || !ok {
		t.Fatalf("extend: %v %v", ok, err)
	}
	if ttl := client.PTTL(ctx, "g:resource").Val(); ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("ttl after extend %v", ttl)
	}
	ok, err = m.Unlock()
	if err != nil || !ok {
		t.Fatalf("unlock: %v %v", ok, err)
	}
	if n := client.Exists(ctx, "g:resource").Val(); n != 0 {
		t.Fatal("unlock left the key")
	}
	// A stale mutex cannot unlock or extend someone else's lock.
	if err := other.Lock(); err != nil {
		t.Fatalf("relock: %v", err)
	}
	if ok, _ := m.Unlock(); ok {
		t.Fatal("stale unlock succeeded")
	}
	if ok, _ := m.Extend(); ok {
		t.Fatal("stale extend succeeded")
	}
	if ok, err := other.Unlock(); !ok || err != nil {
		t.Fatalf("owner unlock: %v %v", ok, err)
	}
}

func TestExpiredLockIsTakenOver(t *testing.T) {
	client := startServer(t)
	rs := redsync.New(goredis.NewPool(client))
	m := rs.NewMutex("g:short", redsync.WithExpiry(300*time.Millisecond), redsync.WithTries(1))
	if err := m.Lock(); err != nil {
		t.Fatal(err)
	}
	waiter := rs.NewMutex("g:short", redsync.WithExpiry(5*time.Second), redsync.WithTries(200), redsync.WithRetryDelay(25*time.Millisecond))
	start := time.Now()
	if err := waiter.Lock(); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	if ok, _ := m.Unlock(); ok {
		t.Fatal("the expired holder unlocked the new owner's lock")
	}
	if ok, err := waiter.Unlock(); !ok || err != nil {
		t.Fatalf("unlock: %v %v", ok, err)
	}
}

func TestContendingClientsNeverOverlap(t *testing.T) {
	client := startServer(t)
	ctx := context.Background()
	addr := client.Options().Addr
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each contender has its own connection pool, as two processes would.
			c := goredislib.NewClient(&goredislib.Options{Addr: addr})
			defer c.Close()
			rs := redsync.New(goredis.NewPool(c))
			for i := 0; i < 40; i++ {
				m := rs.NewMutex("g:contended", redsync.WithExpiry(5*time.Second), redsync.WithTries(1000), redsync.WithRetryDelay(5*time.Millisecond))
				if err := m.Lock(); err != nil {
					errs <- err
					return
				}
				v, _ := c.Get(ctx, "g:count").Int()
				time.Sleep(time.Millisecond)
				c.Set(ctx, "g:count", v+1, 0)
				if ok, err := m.Unlock(); !ok || err != nil {
					errs <- fmt.Errorf("unlock: %v %v", ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n, _ := client.Get(ctx, "g:count").Int(); n != 80 {
		t.Fatalf("count %d, want 80 (lost updates: the lock did not exclude)", n)
	}
}
