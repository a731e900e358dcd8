// go-redsync's normal flows (Lock, Extend, Unlock, TryLock, contention) against ruvio, unchanged: the library
// runs its own Lua scripts. LIBRARY_TARGET=redis runs the same tests against redis-server.
package redsyncproof

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// TestMain doubles as the contending process: TestContendingProcessesNeverOverlap re-executes this test binary with
// REDSYNC_CONTENDER_ADDR set, and then it runs one contender instead of the tests.
func TestMain(m *testing.M) {
	if addr := os.Getenv("REDSYNC_CONTENDER_ADDR"); addr != "" {
		rounds, _ := strconv.Atoi(os.Getenv("REDSYNC_CONTENDER_ROUNDS"))
		os.Exit(contend(addr, os.Getenv("REDSYNC_CONTENDER_ID"), rounds))
	}
	os.Exit(m.Run())
}

// contend is one contending process: it waits until its peer is ready, then `rounds` times takes the lock, checks
// nobody else is inside, does a read-modify-write of a counter that loses updates unless the lock excludes the other
// process, records which process made each step, and unlocks. It returns 1 on any error or overlap it sees.
func contend(addr, id string, rounds int) int {
	ctx := context.Background()
	c := goredislib.NewClient(&goredislib.Options{Addr: addr})
	defer c.Close()
	fail := func(format string, args ...any) int {
		fmt.Printf(id+" FAIL: "+format+"\n", args...)
		return 1
	}
	peer := map[string]string{"p0": "p1", "p1": "p0"}[id]
	c.Set(ctx, "g:ready:"+id, "1", 0)
	deadline := time.Now().Add(60 * time.Second)
	for c.Exists(ctx, "g:ready:"+peer).Val() == 0 {
		if time.Now().After(deadline) {
			return fail("the other contender never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rs := redsync.New(goredis.NewPool(c))
	for i := 0; i < rounds; i++ {
		m := rs.NewMutex("g:contended", redsync.WithExpiry(10*time.Second), redsync.WithTries(4000), redsync.WithRetryDelay(5*time.Millisecond))
		if err := m.Lock(); err != nil {
			return fail("lock: %v", err)
		}
		if before, err := c.GetSet(ctx, "g:inside", id).Result(); err != goredislib.Nil {
			return fail("overlap: %q was inside (%v)", before, err)
		}
		v, _ := c.Get(ctx, "g:count").Int()
		time.Sleep(2 * time.Millisecond)
		c.Set(ctx, "g:count", v+1, 0)
		c.HSet(ctx, "g:record", strconv.Itoa(v+1), id)
		if still, _ := c.GetDel(ctx, "g:inside").Result(); still != id {
			return fail("overlap: %q came inside", still)
		}
		if ok, err := m.Unlock(); !ok || err != nil {
			return fail("unlock: %v %v", ok, err)
		}
		time.Sleep(5 * time.Millisecond) // outside the lock: give the other process its turn
	}
	fmt.Printf("%s done %d\n", id, rounds)
	return 0
}

func TestContendingProcessesNeverOverlap(t *testing.T) {
	client := startServer(t)
	ctx := context.Background()
	const rounds = 40
	var outputs [2]bytes.Buffer
	var cmds []*exec.Cmd
	for w := 0; w < 2; w++ {
		// A separate OS process (this test binary, running contend), with its own connections.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "REDSYNC_CONTENDER_ADDR="+client.Options().Addr,
			fmt.Sprintf("REDSYNC_CONTENDER_ID=p%d", w), fmt.Sprintf("REDSYNC_CONTENDER_ROUNDS=%d", rounds))
		cmd.Stdout = &outputs[w]
		cmd.Stderr = &outputs[w]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		cmds = append(cmds, cmd)
	}
	for w, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil || !strings.Contains(outputs[w].String(), fmt.Sprintf("p%d done %d", w, rounds)) {
				t.Fatalf("contender p%d: %v\n%s", w, err, outputs[w].String())
			}
		case <-time.After(120 * time.Second):
			t.Fatalf("contender p%d did not finish:\n%s", w, outputs[w].String())
		}
	}
	if n, _ := client.Get(ctx, "g:count").Int(); n != 2*rounds {
		t.Fatalf("count %d, want %d (lost updates: the lock did not exclude)", n, 2*rounds)
	}
	// The record: field n = the process that moved the counter from n-1 to n. Every n is there once, each process
	// made its rounds, and they alternated at least twice (they really contended).
	record := client.HGetAll(ctx, "g:record").Val()
	if len(record) != 2*rounds {
		t.Fatalf("record has %d entries, want %d", len(record), 2*rounds)
	}
	p0, switches, last := 0, 0, ""
	for n := 1; n <= 2*rounds; n++ {
		who, ok := record[strconv.Itoa(n)]
		if !ok {
			t.Fatalf("no record for step %d", n)
		}
		if who == "p0" {
			p0++
		}
		if last != "" && who != last {
			switches++
		}
		last = who
	}
	if p0 != rounds || switches < 2 {
		t.Fatalf("p0 made %d of %d steps, %d switches between the processes", p0, 2*rounds, switches)
	}
}
