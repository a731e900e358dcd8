package ruvio

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Why a [Lock] was lost, as returned by Lock.Err.
var (
	// ErrLockExpired: no renewal succeeded in time, so the grant is about to run out on the server (paused or
	// unreachable server, network down). Raised a safety margin before the server-side deadline.
	ErrLockExpired = errors.New("ruvio: lock lost: no renewal succeeded before its deadline")
	// ErrLockRejected: RENEW answered 0, the grant had already ended (expired, deleted).
	ErrLockRejected = errors.New("ruvio: lock lost: the server no longer has the grant")
	// ErrLockMaxHold: the WithMaxHold cap was reached.
	ErrLockMaxHold = errors.New("ruvio: lock lost: the maximum hold time was reached")
	// ErrLockReleased: the lock was released (Lock.Release, or Client.Close).
	ErrLockReleased = errors.New("ruvio: lock released")
)

// LockOption configures [Client.Acquire] and [Client.AcquireSemaphore].
type LockOption func(*lockConfig)

type lockConfig struct {
	wait    time.Duration
	waiting bool
	noRenew bool
	maxHold time.Duration
	margin  time.Duration
}

// WithWait queues up to wait for the lock when it is taken (LEASE ... WAIT); 0 waits until granted or until the
// context ends. Without it, Acquire returns at once.
func WithWait(wait time.Duration) LockOption {
	return func(c *lockConfig) { c.wait, c.waiting = wait, true }
}

// WithoutRenewal turns background renewal off: the lock is then lost (Done closes) a safety margin before its
// first grant runs out.
func WithoutRenewal() LockOption { return func(c *lockConfig) { c.noRenew = true } }

// WithMaxHold caps the total time the lock is kept, counted from the acquire call: renewals never extend past
// it, so a stuck process cannot hold the lock forever. Done closes (ErrLockMaxHold) a safety margin before it.
func WithMaxHold(d time.Duration) LockOption { return func(c *lockConfig) { c.maxHold = d } }

// WithSafetyMargin sets how long before the estimated server-side deadline the lock is declared lost when no
// renewal has succeeded. Default TTL/5. It covers the client's clock running slower than the server's and
// the time the caller needs to stop.
func WithSafetyMargin(d time.Duration) LockOption { return func(c *lockConfig) { c.margin = d } }

// Lock is a held lock or semaphore slot that renews itself in the background, in the shape of etcd's
// concurrency.Session: Token for fencing, Done closed on loss, Err telling why, Release to let go.
//
//   - Renewal: a goroutine sends RENEW about every TTL/3 (unless WithoutRenewal), using the client's pool.
//   - Loss: the grant's server-side deadline is at least send-time + TTL (the server cannot start the TTL before
//     it receives the request), measured on this process's monotonic clock. When no renewal has succeeded and
//     that deadline comes within the safety margin, or RENEW answers 0, or the WithMaxHold cap is near, Done is
//     closed and renewal stops for good: before the server could hand the lock to someone else, as long as the
//     two clocks tick alike.
//   - Fencing: pass Token to every write the lock protects (for example Client.IfGT); Done narrows the window
//     of a stale holder, only the token closes it.
//   - Release stops renewal and sends RELEASE; after a loss it answers false without an error. Always call it
//     (defer l.Release(ctx)): the renewal goroutine runs until Release, loss or Client.Close.
type Lock struct {
	c     *Client
	key   string
	token int64
	ttl   time.Duration
	cfg   lockConfig

	done     chan struct{}
	stop     chan struct{}
	exited   chan struct{}
	stopOnce sync.Once

	mu        sync.Mutex // guards err and the timetable below
	err       error
	lossTimer *time.Timer

	// Renewal timetable.
	deadline    time.Time // estimated server-side deadline of the current grant
	cap         time.Time // zero: no cap
	lastGranted time.Time
	atCap       bool
}

// Acquire takes the lock key with a TTL of ttl and returns a renewing [Lock]. ok is false (and the Lock nil) when
// someone else holds it (after waiting, with WithWait). Like Lease, it is never retried automatically.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, bool, error) {
	return c.acquire(ctx, key, 0, ttl, opts)
}

// AcquireSemaphore takes one of limit slots of the semaphore key and returns a renewing [Lock] for that slot.
func (c *Client) AcquireSemaphore(ctx context.Context, key string, limit int, ttl time.Duration, opts ...LockOption) (*Lock, bool, error) {
	return c.acquire(ctx, key, limit, ttl, opts)
}

func (c *Client) acquire(ctx context.Context, key string, limit int, ttl time.Duration, opts []LockOption) (*Lock, bool, error) {
	var cfg lockConfig
	for _, o := range opts {
		o(&cfg)
	}
	if ttl < time.Millisecond {
		return nil, false, errors.New("ruvio: a lock's ttl must be at least 1 ms")
	}
	if cfg.margin <= 0 || cfg.margin > ttl {
		cfg.margin = ttl / 5
	}
	sent := time.Now()
	var token int64
	var ok bool
	var err error
	switch {
	case limit == 0 && cfg.waiting:
		token, ok, err = c.LeaseWait(ctx, key, ttl, cfg.wait)
	case limit == 0:
		token, ok, err = c.Lease(ctx, key, ttl)
	case cfg.waiting:
		token, ok, err = c.SemaphoreWait(ctx, key, limit, ttl, cfg.wait)
	default:
		token, ok, err = c.Semaphore(ctx, key, limit, ttl)
	}
	if err != nil || !ok {
		return nil, ok, err
	}
	l := &Lock{
		c: c, key: key, token: token, ttl: ttl, cfg: cfg,
		done: make(chan struct{}), stop: make(chan struct{}), exited: make(chan struct{}),
		deadline: sent.Add(ttl), lastGranted: sent,
	}
	if cfg.maxHold > 0 {
		l.cap = sent.Add(cfg.maxHold)
		if !l.cap.After(l.deadline) {
			l.deadline, l.atCap = l.cap, true
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_, _ = c.Release(context.Background(), key, token)
		return nil, false, ErrClosed
	}
	c.locks[l] = struct{}{}
	c.mu.Unlock()
	// A grant that waited in the queue is timed by the server from when it was granted, later than we assume:
	// renew at once to learn a fresher deadline instead of declaring loss too early.
	renewNow := cfg.waiting && time.Since(sent) >= ttl/3
	go l.run(renewNow)
	return l, true, nil
}

// Key is the lock's key.
func (l *Lock) Key() string { return l.key }

// Token is the fencing token of this grant: pass it to every write the lock protects.
func (l *Lock) Token() int64 { return l.token }

// Done returns a channel closed when the lock is lost or released.
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err is nil while the lock is held; after Done is closed it says why: ErrLockExpired, ErrLockRejected,
// ErrLockMaxHold or ErrLockReleased.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// lose records the first reason only and closes Done.
func (l *Lock) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
		close(l.done)
	}
}

// Release stops renewal and sends RELEASE. It returns true when the lock was released, false when the grant
// had already ended (a lost lock answers false, without an error). Calling it again sends RELEASE again
// (answering false).
func (l *Lock) Release(ctx context.Context) (bool, error) {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.exited
	// Marked released before the command: from the moment RELEASE may reach the server, the lock is not held.
	l.lose(ErrLockReleased)
	l.c.mu.Lock()
	delete(l.c.locks, l)
	l.c.mu.Unlock()
	return l.c.Release(ctx, l.key, l.token)
}

// lossAt is when loss is declared unless a renewal succeeds first (l.mu held, or before start).
func (l *Lock) lossAt() time.Time { return l.deadline.Add(-l.cfg.margin) }

// onLossTimer runs on its own timer, apart from the renewal goroutine, so a renewal stuck on a paused server
// cannot delay the signal: at lossAt it declares the loss, unless a renewal moved the deadline meanwhile (then it
// waits for the new one).
func (l *Lock) onLossTimer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if wait := time.Until(l.lossAt()); wait > 0 {
		l.lossTimer.Reset(wait)
		return
	}
	if l.atCap {
		l.err = ErrLockMaxHold
	} else {
		l.err = ErrLockExpired
	}
	close(l.done)
}

func (l *Lock) run(renewNow bool) {
	defer close(l.exited)
	l.mu.Lock()
	l.lossTimer = time.AfterFunc(time.Until(l.lossAt()), l.onLossTimer)
	l.mu.Unlock()
	defer l.lossTimer.Stop()
	if l.cfg.noRenew {
		select {
		case <-l.stop:
		case <-l.done:
		}
		return
	}
	var retryAt time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.mu.Lock()
		next := l.lastGranted.Add(l.ttl / 3)
		if la := l.lossAt(); la.Before(next) {
			next = la
		}
		atCap := l.atCap
		l.mu.Unlock()
		if !retryAt.IsZero() {
			next = retryAt
		}
		if renewNow {
			next = time.Now()
		}
		if atCap {
			// The last grant ends at the cap: nothing left to renew; wait for the loss timer or a release.
			select {
			case <-l.stop:
			case <-l.done:
			}
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(next))
		select {
		case <-l.stop:
			return
		case <-l.done:
			return
		case <-timer.C:
		}
		renewNow = false
		ok, failed := l.renew()
		if !ok {
			l.lose(ErrLockRejected)
			return
		}
		if failed {
			pause := l.ttl / 20
			if pause < 10*time.Millisecond {
				pause = 10 * time.Millisecond
			} else if pause > 500*time.Millisecond {
				pause = 500 * time.Millisecond
			}
			retryAt = time.Now().Add(pause)
		} else {
			retryAt = time.Time{}
		}
	}
}

// renew makes one attempt, never running past the loss deadline (or a Release). ok false: the server said the
// grant is gone. failed: no answer (try again soon).
func (l *Lock) renew() (ok, failed bool) {
	sent := time.Now()
	ttl := l.ttl
	if !l.cap.IsZero() {
		if left := l.cap.Sub(sent); left < ttl {
			ttl = left
		}
		if ttl < time.Millisecond {
			ttl = time.Millisecond
		}
	}
	l.mu.Lock()
	lossAt := l.lossAt()
	l.mu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), lossAt)
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	renewed, err := l.c.Renew(ctx, l.key, l.token, ttl)
	if errors.Is(err, ErrWrongType) {
		return false, false // the key now holds something else: the grant is gone
	}
	if err != nil {
		return true, true
	}
	if !renewed {
		return false, false
	}
	l.mu.Lock()
	if d := sent.Add(ttl); d.After(l.deadline) {
		l.deadline = d
	}
	l.atCap = !l.cap.IsZero() && ttl < l.ttl
	l.lastGranted = sent
	l.mu.Unlock()
	return true, false
}
