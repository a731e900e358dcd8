package ruvio

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLockCommands(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	for _, proto := range []int{2, 3} {
		c := connect(t, Options{Addr: s.Addr(), Protocol: proto})
		other := connect(t, Options{Addr: s.Addr(), Protocol: proto})
		key := "lk:" + string(rune('0'+proto))

		t1, ok := chk2(c.Lease(ctx, key, 30*time.Second))(t)
		if !ok || t1 <= 0 {
			t.Fatalf("Lease = %d %v", t1, ok)
		}
		if tok, ok := chk2(other.Lease(ctx, key, 30*time.Second))(t); ok || tok != 0 {
			t.Fatalf("a held lock was granted again: %d", tok)
		}
		if !chk(c.Renew(ctx, key, t1, 60*time.Second))(t) {
			t.Fatal("Renew by the holder answered false")
		}
		if chk(c.Renew(ctx, key, t1+1, 60*time.Second))(t) {
			t.Fatal("Renew with a wrong token answered true")
		}
		info, ok := chk2(c.LockInfo(ctx, key))(t)
		if !ok || info.Kind != "lease" || info.Limit != 1 || len(info.Holders) != 1 || info.Holders[0].Token != t1 ||
			info.Holders[0].Remaining <= 30*time.Second || info.Holders[0].Remaining > 60*time.Second || info.Waiters != 0 {
			t.Fatalf("LockInfo = %+v %v", info, ok)
		}
		if chk(c.Release(ctx, key, t1+1))(t) {
			t.Fatal("a stale token released the lock")
		}
		if !chk(c.Release(ctx, key, t1))(t) {
			t.Fatal("Release by the holder answered false")
		}
		if chk(c.Release(ctx, key, t1))(t) {
			t.Fatal("releasing twice answered true")
		}
		if _, ok := chk2(c.LockInfo(ctx, key))(t); ok {
			t.Fatal("LockInfo of a free lock says ok")
		}
		t2, ok := chk2(other.Lease(ctx, key, 30*time.Second))(t)
		if !ok || t2 <= t1 {
			t.Fatalf("tokens must grow: %d then %d", t1, t2)
		}
		chk(other.Release(ctx, key, t2))(t)

		// Semaphore: limit slots, each its own token; the key goes away with the last holder.
		sem := key + ":sem"
		var toks []int64
		for i := 0; i < 3; i++ {
			tok, ok := chk2(c.Semaphore(ctx, sem, 3, 30*time.Second))(t)
			if !ok {
				t.Fatalf("slot %d refused", i)
			}
			toks = append(toks, tok)
		}
		if _, ok := chk2(other.Semaphore(ctx, sem, 3, 30*time.Second))(t); ok {
			t.Fatal("a 4th slot of 3 was granted")
		}
		_, _, err := other.Semaphore(ctx, sem, 4, 30*time.Second)
		var se *Error
		if !errors.As(err, &se) || se.Code != "ERR" || !strings.Contains(se.Message, "semaphore limit is 3") {
			t.Fatalf("another limit: %v", err)
		}
		info = chk(func() (LockInfo, error) { i, _, e := c.LockInfo(ctx, sem); return i, e }())(t)
		if info.Kind != "semaphore" || info.Limit != 3 || len(info.Holders) != 3 || info.Holders[2].Token != toks[2] {
			t.Fatalf("semaphore LockInfo = %+v", info)
		}
		if !chk(c.Renew(ctx, sem, toks[1], time.Minute))(t) {
			t.Fatal("Renew of a slot")
		}
		for _, tok := range toks {
			if !chk(c.Release(ctx, sem, tok))(t) {
				t.Fatal("slot release")
			}
		}
		if n := chk(Int64(c.Do(ctx, "EXISTS", sem)))(t); n != 0 {
			t.Fatal("the semaphore key outlived its last holder")
		}

		// IfGT: a fenced write refuses an older token.
		fk := key + ":fenced"
		if !chk(c.IfGT(ctx, fk, 100, "v100", 0))(t) {
			t.Fatal("IfGT 100")
		}
		if chk(c.IfGT(ctx, fk, 99, "v99", 0))(t) {
			t.Fatal("IfGT with an older token wrote")
		}
		if !chk(c.IfGT(ctx, fk, 101, []byte("v101"), time.Minute))(t) {
			t.Fatal("IfGT 101 with a TTL")
		}
		if v, _, _ := c.Get(ctx, fk); v != "v101" {
			t.Fatalf("fenced value %q", v)
		}
		if pttl := chk(Int64(c.Do(ctx, "PTTL", fk)))(t); pttl <= 0 {
			t.Fatalf("IfGT with a ttl: PTTL %d", pttl)
		}

		// Errors carry the server's code.
		_, _, err = c.Lease(ctx, fk, time.Second)
		if !errors.Is(err, ErrWrongType) || !errors.As(err, &se) || se.Code != "WRONGTYPE" {
			t.Fatalf("LEASE on a string: %v", err)
		}
		_, err = c.Release(ctx, fk, 1)
		if !errors.Is(err, ErrWrongType) {
			t.Fatalf("RELEASE on a string: %v", err)
		}
		_, _, err = c.Lease(ctx, key, 0)
		if !errors.As(err, &se) || !strings.Contains(se.Message, "invalid ttl_ms") {
			t.Fatalf("LEASE with ttl 0: %v", err)
		}
	}
}

func TestWaitingForms(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	held, _ := chk2(c.Lease(ctx, "w:lock", 30*time.Second))(t)
	// The timeout passes: not acquired, after at least the wait.
	start := time.Now()
	if _, ok := chk2(c.LeaseWait(ctx, "w:lock", time.Second, 300*time.Millisecond))(t); ok {
		t.Fatal("granted while held")
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the wait of 300ms", el)
	}
	// Released while waiting: granted, with a newer token. The wait exceeds the command timeout (extended).
	short := connect(t, Options{Addr: s.Addr(), CommandTimeout: 200 * time.Millisecond})
	type grant struct {
		tok int64
		ok  bool
		err error
	}
	got := make(chan grant, 1)
	go func() {
		tok, ok, err := short.LeaseWait(ctx, "w:lock", 30*time.Second, 20*time.Second)
		got <- grant{tok, ok, err}
	}()
	waitFor(t, 10*time.Second, func() bool {
		info, _, err := c.LockInfo(ctx, "w:lock")
		return err == nil && info.Waiters == 1
	})
	time.Sleep(400 * time.Millisecond) // longer than short's command timeout: the wait must still go on
	chk(c.Release(ctx, "w:lock", held))(t)
	g := <-got
	if g.err != nil || !g.ok || g.tok <= held {
		t.Fatalf("LeaseWait = %+v", g)
	}
	// Semaphore with wait.
	s1, _ := chk2(c.Semaphore(ctx, "w:sem", 1, 30*time.Second))(t)
	if _, ok := chk2(c.SemaphoreWait(ctx, "w:sem", 1, time.Second, 200*time.Millisecond))(t); ok {
		t.Fatal("semaphore slot granted while full")
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = c.Release(ctx, "w:sem", s1)
	}()
	if tok, ok := chk2(c.SemaphoreWait(ctx, "w:sem", 1, time.Second, 20*time.Second))(t); !ok || tok <= s1 {
		t.Fatalf("SemaphoreWait = %d %v", tok, ok)
	}
	if _, _, err := c.LeaseWait(ctx, "w:x", time.Second, -time.Second); err == nil {
		t.Fatal("a negative wait must fail")
	}
}

// ---- the lock helper ----

func goroutinesSettle(t *testing.T, before int) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(end) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutine leak: %d running, %d before\n%s", runtime.NumGoroutine(), before, buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLockHelperRenewsOverSeveralTTLs(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	other := connect(t, Options{Addr: s.Addr()})
	before := runtime.NumGoroutine()
	l, ok, err := c.Acquire(ctx, "g:renew", 2*time.Second)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if l.Key() != "g:renew" || l.Token() <= 0 || l.Err() != nil {
		t.Fatalf("lock %q %d %v", l.Key(), l.Token(), l.Err())
	}
	// Several TTLs later it is still held (renewed), by the same token, and nobody else can take it.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-l.Done():
			t.Fatalf("lost while the server is up: %v", l.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if _, ok := chk2(other.Lease(ctx, "g:renew", time.Minute))(t); ok {
			t.Fatal("someone else got the lock the helper should be renewing")
		}
	}
	info, ok := chk2(c.LockInfo(ctx, "g:renew"))(t)
	if !ok || info.Holders[0].Token != l.Token() {
		t.Fatalf("LockInfo after renewals: %+v", info)
	}
	if info := chk(String(c.Do(ctx, "INFO", "locks")))(t); !strings.Contains(info, "lock_renewals:") || strings.Contains(info, "lock_renewals:0\r") {
		t.Fatalf("INFO locks shows no renewals:\n%s", info)
	}
	if !chk(l.Release(ctx))(t) {
		t.Fatal("Release of a held lock answered false")
	}
	<-l.Done()
	if !errors.Is(l.Err(), ErrLockReleased) {
		t.Fatalf("Err after Release: %v", l.Err())
	}
	if chk(l.Release(ctx))(t) {
		t.Fatal("a second Release answered true")
	}
	goroutinesSettle(t, before)
}

func TestLockHelperSignalsLossBeforeTheDeadlineWhenTheServerPauses(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr(), CommandTimeout: 2 * time.Second})
	before := runtime.NumGoroutine()
	ttl := 3 * time.Second
	sent := time.Now()
	// A generous margin: the machine may be loaded, and the check is that loss comes before sent + ttl.
	l, ok, err := c.Acquire(ctx, "g:pause", ttl, WithSafetyMargin(time.Second))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	var lostAt time.Time
	watched := make(chan struct{})
	go func() { <-l.Done(); lostAt = time.Now(); close(watched) }()
	s.pause()
	paused := true
	defer func() {
		if paused {
			s.resume()
		}
	}()
	select {
	case <-watched:
	case <-time.After(20 * time.Second):
		t.Fatal("no loss signal while the server is paused past the TTL")
	}
	if !errors.Is(l.Err(), ErrLockExpired) {
		t.Fatalf("Err = %v", l.Err())
	}
	// The signal comes from the client's monotonic clock before sent + ttl, the earliest the server could expire it.
	if !lostAt.Before(sent.Add(ttl)) {
		t.Fatalf("loss signalled %v after sending, not before the TTL %v", lostAt.Sub(sent), ttl)
	}
	time.Sleep(ttl) // the server's deadline passes while it is paused
	s.resume()
	paused = false
	// Release after loss: false, no error.
	released, err := l.Release(ctx)
	if err != nil || released {
		t.Fatalf("Release after loss = %v, %v; want false, nil", released, err)
	}
	goroutinesSettle(t, before)
}

func TestLockHelperReportsABrokenLock(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	l, ok, err := c.Acquire(ctx, "g:broken", 3*time.Second)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	chk(c.Del(ctx, "g:broken"))(t)
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a deleted lock was not reported lost")
	}
	if !errors.Is(l.Err(), ErrLockRejected) {
		t.Fatalf("Err = %v", l.Err())
	}
	// It never re-acquires: the key stays free.
	time.Sleep(time.Second)
	if n := chk(Int64(c.Do(ctx, "EXISTS", "g:broken")))(t); n != 0 {
		t.Fatal("the helper brought a broken lock back")
	}
	if ok := chk(l.Release(ctx))(t); ok {
		t.Fatal("Release after loss answered true")
	}
}

func TestLockHelperMaxHoldAndNoRenew(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	start := time.Now()
	l, ok, err := c.Acquire(ctx, "g:cap", 1500*time.Millisecond, WithMaxHold(3*time.Second))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	select {
	case <-l.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the hold cap did not end the lock")
	}
	if !errors.Is(l.Err(), ErrLockMaxHold) {
		t.Fatalf("Err = %v", l.Err())
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("lost after %v: it should have renewed at least until near the cap", el)
	}
	// The server-side lease runs out by the cap: renewals never asked for more.
	waitFor(t, 5*time.Second, func() bool {
		n, err := Int64(c.Do(ctx, "EXISTS", "g:cap"))
		return err == nil && n == 0
	})
	if time.Since(start) < 2900*time.Millisecond {
		t.Fatal("the lease ended before the cap")
	}
	chk(l.Release(ctx))(t)

	// Without renewal: lost a margin before the first grant runs out.
	n, ok, err := c.Acquire(ctx, "g:norenew", 500*time.Millisecond, WithoutRenewal(), WithSafetyMargin(100*time.Millisecond))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no loss without renewal")
	}
	if !errors.Is(n.Err(), ErrLockExpired) {
		t.Fatalf("Err = %v", n.Err())
	}
	chk(n.Release(ctx))(t)
}

func TestLockHelperWaitsAndSemaphore(t *testing.T) {
	s := startServer(t)
	ctx := testCtx(t)
	c := connect(t, Options{Addr: s.Addr()})
	first, ok, err := c.Acquire(ctx, "g:wait", 30*time.Second)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if l, ok, err := c.Acquire(ctx, "g:wait", time.Second); err != nil || ok || l != nil {
		t.Fatalf("Acquire of a held lock: %v %v %v", l, ok, err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = first.Release(ctx)
	}()
	second, ok, err := c.Acquire(ctx, "g:wait", 2*time.Second, WithWait(20*time.Second))
	if err != nil || !ok || second.Token() <= first.Token() {
		t.Fatalf("waited Acquire: %v %v", ok, err)
	}
	time.Sleep(3 * time.Second) // renewed past its first TTL
	select {
	case <-second.Done():
		t.Fatalf("lost: %v", second.Err())
	default:
	}
	chk(second.Release(ctx))(t)

	var wg sync.WaitGroup
	var slots []*Lock
	var mu sync.Mutex
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, ok, err := c.AcquireSemaphore(ctx, "g:sem", 2, 30*time.Second)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				slots = append(slots, l)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(slots) != 2 {
		t.Fatalf("%d slots of 2 granted", len(slots))
	}
	for _, l := range slots {
		if !chk(l.Release(ctx))(t) {
			t.Fatal("slot release")
		}
	}
	if _, _, err := c.Acquire(ctx, "g:x", 0); err == nil {
		t.Fatal("a zero ttl must fail")
	}
}
