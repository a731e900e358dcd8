package main

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"time"
)

const casDel = "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end"

// Client: one workload client. It finds the primary through the coordinators (SENTINEL get-master-addr-by-name)
// and rediscovers after every error.
type Client struct {
	ID      int
	cl      *Cluster
	h       *History
	conn    *Conn
	port    int
	durable bool
	timeout time.Duration
	think   time.Duration // pause between iterations (long runs: keeps the history within Porcupine's reach)
	rnd     *rand.Rand
}

func (c *Client) drop() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

func (c *Client) ensure() bool {
	if c.conn != nil {
		return true
	}
	// Ask the coordinators in random order; the first answer wins.
	port := 0
	for _, i := range c.rnd.Perm(len(c.cl.Coords)) {
		if port = askMaster(c.cl.Coords[i].Addr()); port > 0 {
			break
		}
	}
	if port == 0 {
		return false
	}
	conn, err := Dial(fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	if c.durable {
		if _, err := conn.Do(2*time.Second, "CLIENT", "DURABILITY", "REPLICAS", "1"); err != nil {
			conn.Close()
			return false
		}
	}
	c.conn, c.port = conn, port
	return true
}

// do runs one command; it returns the reply, whether the outcome is known, and the error. A network error or
// timeout leaves the outcome unknown and drops the connection; any error makes the client rediscover the primary.
func (c *Client) do(args ...string) (interface{}, bool, error) {
	v, err := c.conn.Do(c.timeout, args...)
	if err != nil {
		if _, ok := err.(RedisErr); ok {
			if strings.HasPrefix(err.Error(), "READONLY") || strings.HasPrefix(err.Error(), "LOADING") ||
				strings.HasPrefix(err.Error(), "NOREPLICAS") || strings.HasPrefix(err.Error(), "MISCONF") ||
				strings.HasPrefix(err.Error(), "NOTDURABLE") {
				c.drop()
			}
			return nil, true, err
		}
		c.drop()
		return nil, false, err
	}
	return v, true, nil
}

func (c *Client) pause() { time.Sleep(time.Duration(20+c.rnd.Intn(80)) * time.Millisecond) }

// errStatus: the status of a write that answered an error. NOTDURABLE on a plain write means "applied here, may be
// lost" (unknown); on a grant it was undone (fail). Other error replies mean it did not run.
func errStatus(err error, grant bool) string {
	if strings.HasPrefix(err.Error(), "NOTDURABLE") && !grant {
		return "info"
	}
	return "fail"
}

// Workload 1: the fenced register. Take the lease lock:K, read reg:K, write it with IFGT and the token, release.
func (c *Client) register(stop <-chan struct{}, keys, ttl int) {
	n := 0
	for {
		select {
		case <-stop:
			c.drop()
			return
		default:
		}
		if !c.ensure() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if c.think > 0 {
			time.Sleep(c.think)
		}
		k := fmt.Sprint(c.rnd.Intn(keys))
		n++
		val := fmt.Sprintf("c%d-%d", c.ID, n)
		g := c.h.Invoke(&Op{Client: c.ID, Workload: "register", Kind: "grant", Key: "lock:" + k, TTL: ttl, Limit: 1, Node: c.port})
		var token uint64
		if c.cl.System == "redis" {
			v, known, err := c.do("SET", "lock:"+k, val, "NX", "PX", fmt.Sprint(ttl))
			if err != nil {
				g.Err = err.Error()
				c.h.Complete(g, map[bool]string{true: "fail", false: "info"}[known])
				continue
			}
			if v == nil {
				c.h.Complete(g, "fail")
				c.pause()
				continue
			}
			g.Value = val
			w, _, err := c.do("WAIT", "1", "1000")
			if err != nil || w == nil || w.(int64) < 1 {
				g.Err = fmt.Sprintf("WAIT 1: %v %v", w, err)
				c.h.Complete(g, "info") // granted on the primary, not acknowledged by a replica: the client gives up
				if c.conn != nil {
					c.do("EVAL", casDel, "1", "lock:"+k, val)
				}
				continue
			}
			c.h.Complete(g, "ok")
		} else {
			v, known, err := c.do("LEASE", "lock:"+k, fmt.Sprint(ttl))
			if err != nil {
				g.Err = err.Error()
				if known {
					c.h.Complete(g, "fail")
				} else {
					c.h.Complete(g, "info")
				}
				continue
			}
			if v == nil {
				c.h.Complete(g, "fail")
				c.pause()
				continue
			}
			token = uint64(v.(int64))
			g.Token = token
			c.h.Complete(g, "ok")
		}
		// Read the register (a read counts in durable mode only if the write after it is acknowledged: that write
		// is the barrier that makes what the read saw durable).
		r := c.h.Invoke(&Op{Client: c.ID, Workload: "register", Kind: "read", Key: "reg:" + k, Token: token, Node: c.port})
		v, _, err := c.do("GET", "reg:"+k)
		if err != nil {
			r.Err = err.Error()
			c.h.Complete(r, "fail")
			continue
		}
		if v != nil {
			r.Result = v.(string)
		}
		c.h.Complete(r, "ok")
		w := c.h.Invoke(&Op{Client: c.ID, Workload: "register", Kind: "write", Key: "reg:" + k, Token: token, Value: val, Node: c.port, GrantID: g.ID})
		if c.cl.System == "redis" {
			_, known, err := c.do("SET", "reg:"+k, val)
			if err != nil {
				w.Err = err.Error()
				c.h.Complete(w, map[bool]string{true: "fail", false: "info"}[known])
			} else if a, _, err := c.do("WAIT", "1", "1000"); err != nil || a == nil || a.(int64) < 1 {
				w.Err = fmt.Sprintf("WAIT 1: %v %v", a, err)
				c.h.Complete(w, "info")
			} else {
				w.Result = "1"
				c.h.Complete(w, "ok")
			}
		} else {
			a, known, err := c.do("IFGT", "reg:"+k, fmt.Sprint(token), val)
			if err != nil {
				w.Err = err.Error()
				if known {
					c.h.Complete(w, errStatus(err, false))
				} else {
					c.h.Complete(w, "info")
				}
			} else {
				w.Result = fmt.Sprint(a)
				c.h.Complete(w, "ok")
			}
		}
		if c.durable && !(w.Status == "ok" && w.Result == "1") {
			r.Status = "unconfirmed"
		}
		if c.conn == nil {
			continue
		}
		rel := c.h.Invoke(&Op{Client: c.ID, Workload: "register", Kind: "release", Key: "lock:" + k, Token: token, GrantID: g.ID, Node: c.port})
		var rv interface{}
		var known bool
		if c.cl.System == "redis" {
			rv, known, err = c.do("EVAL", casDel, "1", "lock:"+k, val)
		} else {
			rv, known, err = c.do("RELEASE", "lock:"+k, fmt.Sprint(token))
		}
		if err != nil {
			rel.Err = err.Error()
			c.h.Complete(rel, map[bool]string{true: "fail", false: "info"}[known])
		} else {
			rel.Result = fmt.Sprint(rv)
			c.h.Complete(rel, "ok")
		}
	}
}

// Workload 2: a mutex on a few hot keys, and a semaphore with a small limit. Hold, then release.
func (c *Client) mutex(stop <-chan struct{}, ttl, semLimit int) {
	for {
		select {
		case <-stop:
			c.drop()
			return
		default:
		}
		if !c.ensure() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var key string
		var args []string
		limit := 1
		if c.rnd.Intn(2) == 0 {
			key = fmt.Sprintf("mutex:%d", c.rnd.Intn(2))
			args = []string{"LEASE", key, fmt.Sprint(ttl)}
		} else {
			key, limit = "sem:0", semLimit
			args = []string{"SEMAPHORE", key, fmt.Sprint(semLimit), fmt.Sprint(ttl)}
		}
		g := c.h.Invoke(&Op{Client: c.ID, Workload: "mutex", Kind: "grant", Key: key, TTL: ttl, Limit: limit, Node: c.port})
		v, known, err := c.do(args...)
		if err != nil {
			g.Err = err.Error()
			c.h.Complete(g, map[bool]string{true: "fail", false: "info"}[known])
			continue
		}
		if v == nil {
			c.h.Complete(g, "fail")
			c.pause()
			continue
		}
		g.Token = uint64(v.(int64))
		c.h.Complete(g, "ok")
		time.Sleep(time.Duration(c.rnd.Intn(30)) * time.Millisecond)
		if c.conn == nil {
			continue
		}
		rel := c.h.Invoke(&Op{Client: c.ID, Workload: "mutex", Kind: "release", Key: key, Token: g.Token, GrantID: g.ID, Node: c.port})
		rv, known, err := c.do("RELEASE", key, fmt.Sprint(g.Token))
		if err != nil {
			rel.Err = err.Error()
			c.h.Complete(rel, map[bool]string{true: "fail", false: "info"}[known])
		} else {
			rel.Result = fmt.Sprint(rv)
			c.h.Complete(rel, "ok")
		}
	}
}

// Workload 3: a durable counter (INCR) and set (unique elements added as hash fields: HSET set e 1).
func (c *Client) counter(stop <-chan struct{}) {
	n := 0
	for {
		select {
		case <-stop:
			c.drop()
			return
		default:
		}
		if !c.ensure() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		n++
		var op *Op
		var args []string
		if n%2 == 0 {
			op = &Op{Client: c.ID, Workload: "counter", Kind: "incr", Key: "counter", Node: c.port}
			args = []string{"INCR", "counter"}
		} else {
			e := fmt.Sprintf("e%d-%d", c.ID, n)
			op = &Op{Client: c.ID, Workload: "counter", Kind: "sadd", Key: "set", Value: e, Node: c.port}
			args = []string{"HSET", "set", e, "1"} // a set as the keys of a hash
		}
		c.h.Invoke(op)
		v, known, err := c.do(args...)
		if err != nil {
			op.Err = err.Error()
			if known {
				c.h.Complete(op, errStatus(err, false))
			} else {
				c.h.Complete(op, "info")
			}
		} else {
			op.Result = fmt.Sprint(v)
			c.h.Complete(op, "ok")
		}
		time.Sleep(time.Duration(c.rnd.Intn(20)) * time.Millisecond)
	}
}

// outcome: the status of an operation that answered err; known says whether the outcome is known (an error reply)
// or not (a timeout, a lost connection); grant as for errStatus.
func outcome(known bool, err error, grant bool) string {
	if !known {
		return "info"
	}
	return errStatus(err, grant)
}

// tokenOf: a fencing token from a reply: an integer from LEASE/SEMAPHORE, or the exact decimal string lock commands
// give a script (Lua numbers are doubles and would round tokens of epoch 1 and above), which returns it as it is.
func tokenOf(v interface{}) (uint64, bool) {
	switch x := v.(type) {
	case int64:
		return uint64(x), x > 0
	case string:
		t, err := strconv.ParseUint(x, 10, 64)
		return t, err == nil && t > 0
	}
	return 0, false
}

// exec runs MULTI, the commands and EXEC, and returns EXEC's replies (an error reply of a command is its element,
// as a RedisErr). An error reply to MULTI, to a queued command (NOREPLICAS on a durable connection with too few
// replicas) or to EXEC (EXECABORT, NOTDURABLE) is known; a network error leaves the outcome unknown.
func (c *Client) exec(cmds ...[]string) ([]interface{}, bool, error) {
	if _, known, err := c.do("MULTI"); err != nil {
		return nil, known, err
	}
	for _, cmd := range cmds {
		if _, known, err := c.do(cmd...); err != nil {
			// A refused command makes EXEC fail; the connection may already be dropped (c.do does on NOREPLICAS).
			if known && c.conn != nil {
				c.do("DISCARD")
			}
			return nil, known, err
		}
	}
	v, known, err := c.do("EXEC")
	if err != nil {
		return nil, known, err
	}
	arr, ok := v.([]interface{})
	if !ok || len(arr) != len(cmds) {
		return nil, true, fmt.Errorf("EXEC answered %v", v)
	}
	return arr, true, nil
}

// Workload 4: the fenced register through transactions (Ruvio, durable phase). MULTI; LEASE lock:K; GET reg:K;
// EXEC takes the lock and reads the register at one instant; MULTI; IFGT reg:K token value; RELEASE lock:K token;
// EXEC writes and lets go. On a durable connection each EXEC is answered only once a replica fsynced it; an EXEC
// answered NOTDURABLE had its grant undone (the grant failed) and its other writes applied (unknown).
func (c *Client) txRegister(stop <-chan struct{}, keys, ttl int) {
	n := 0
	for {
		select {
		case <-stop:
			c.drop()
			return
		default:
		}
		if !c.ensure() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if c.think > 0 {
			time.Sleep(c.think)
		}
		k := fmt.Sprint(c.rnd.Intn(keys))
		n++
		val := fmt.Sprintf("tx%d-%d", c.ID, n)
		g := c.h.Invoke(&Op{Client: c.ID, Workload: "tx-register", Kind: "grant", Key: "lock:" + k, TTL: ttl, Limit: 1, Node: c.port})
		r := c.h.Invoke(&Op{Client: c.ID, Workload: "tx-register", Kind: "read", Key: "reg:" + k, Node: c.port})
		v, known, err := c.exec([]string{"LEASE", "lock:" + k, fmt.Sprint(ttl)}, []string{"GET", "reg:" + k})
		if err != nil {
			g.Err, r.Err = err.Error(), err.Error()
			c.h.Complete(g, outcome(known, err, true))
			c.h.Complete(r, "fail")
			continue
		}
		token, granted := tokenOf(v[0])
		if !granted {
			if v[0] != nil {
				g.Err = fmt.Sprint(v[0])
			}
			c.h.Complete(g, "fail")
			c.h.Complete(r, "fail") // counted only as the read of a holder (below)
			c.pause()
			continue
		}
		g.Token, r.Token = token, token
		c.h.Complete(g, "ok")
		switch x := v[1].(type) {
		case string:
			r.Result = x
			c.h.Complete(r, "ok")
		case nil:
			c.h.Complete(r, "ok")
		default:
			r.Err = fmt.Sprint(x)
			c.h.Complete(r, "fail")
		}
		if c.conn == nil {
			continue
		}
		w := c.h.Invoke(&Op{Client: c.ID, Workload: "tx-register", Kind: "write", Key: "reg:" + k, Token: token, Value: val, Node: c.port, GrantID: g.ID})
		rel := c.h.Invoke(&Op{Client: c.ID, Workload: "tx-register", Kind: "release", Key: "lock:" + k, Token: token, GrantID: g.ID, Node: c.port})
		v, known, err = c.exec([]string{"IFGT", "reg:" + k, fmt.Sprint(token), val}, []string{"RELEASE", "lock:" + k, fmt.Sprint(token)})
		if err != nil {
			w.Err, rel.Err = err.Error(), err.Error()
			c.h.Complete(w, outcome(known, err, false))
			c.h.Complete(rel, outcome(known, err, false))
		} else {
			w.Result, rel.Result = fmt.Sprint(v[0]), fmt.Sprint(v[1])
			c.h.Complete(w, "ok")
			c.h.Complete(rel, "ok")
		}
		// As in workload 1: in the durable phase the read counts only if the write after it was acknowledged.
		if c.durable && !(w.Status == "ok" && w.Result == "1") && r.Status == "ok" {
			r.Status = "unconfirmed"
		}
	}
}

// The scripts of workload 5: docs/scripting.md's lease + fenced write (the token reaches Lua, and comes back, as a
// string), a semaphore slot, and a release with the token passed in ARGV.
const (
	leaseFencedScript = "local t = redis.call('LEASE', KEYS[1], ARGV[1]) if not t then return false end return {t, redis.call('IFGT', KEYS[2], t, ARGV[2])}"
	semaphoreScript   = "return redis.call('SEMAPHORE', KEYS[1], ARGV[1], ARGV[2])"
	releaseScript     = "return redis.call('RELEASE', KEYS[1], ARGV[1])"
)

// Workload 5: locks taken inside scripts (Ruvio, durable phase). Two in three rounds: one EVAL takes lock:K and
// writes reg:K with IFGT and the token, a second EVAL releases it. Otherwise: an EVAL takes a slot of sem:0 (the
// semaphore of workload 2, same limit), holds it 0-30 ms, an EVAL releases it. A script answered NOTDURABLE had its
// grant undone (the grant failed) and its IFGT applied (unknown).
func (c *Client) scriptLocks(stop <-chan struct{}, keys, ttl, semLimit int) {
	n := 0
	for {
		select {
		case <-stop:
			c.drop()
			return
		default:
		}
		if !c.ensure() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if c.think > 0 {
			time.Sleep(c.think)
		}
		n++
		var g *Op
		var lockKey string
		if c.rnd.Intn(3) > 0 {
			k := fmt.Sprint(c.rnd.Intn(keys))
			lockKey = "lock:" + k
			val := fmt.Sprintf("s%d-%d", c.ID, n)
			g = c.h.Invoke(&Op{Client: c.ID, Workload: "script-register", Kind: "grant", Key: lockKey, TTL: ttl, Limit: 1, Node: c.port})
			w := c.h.Invoke(&Op{Client: c.ID, Workload: "script-register", Kind: "write", Key: "reg:" + k, Value: val, Node: c.port, GrantID: g.ID})
			v, known, err := c.do("EVAL", leaseFencedScript, "2", lockKey, "reg:"+k, fmt.Sprint(ttl), val)
			if err != nil {
				g.Err, w.Err = err.Error(), err.Error()
				c.h.Complete(g, outcome(known, err, true))
				c.h.Complete(w, outcome(known, err, false))
				continue
			}
			if v == nil {
				c.h.Complete(g, "fail")
				c.h.Complete(w, "fail")
				c.pause()
				continue
			}
			arr, ok := v.([]interface{})
			var token uint64
			if ok && len(arr) == 2 {
				token, ok = tokenOf(arr[0])
			}
			if !ok {
				g.Err = fmt.Sprintf("unexpected reply %v", v)
				c.h.Complete(g, "info")
				c.h.Complete(w, "info")
				continue
			}
			g.Token, w.Token = token, token
			c.h.Complete(g, "ok")
			w.Result = fmt.Sprint(arr[1])
			c.h.Complete(w, "ok")
		} else {
			lockKey = "sem:0"
			g = c.h.Invoke(&Op{Client: c.ID, Workload: "script-mutex", Kind: "grant", Key: lockKey, TTL: ttl, Limit: semLimit, Node: c.port})
			v, known, err := c.do("EVAL", semaphoreScript, "1", lockKey, fmt.Sprint(semLimit), fmt.Sprint(ttl))
			if err != nil {
				g.Err = err.Error()
				c.h.Complete(g, outcome(known, err, true))
				continue
			}
			if v == nil {
				c.h.Complete(g, "fail")
				c.pause()
				continue
			}
			token, ok := tokenOf(v)
			if !ok {
				g.Err = fmt.Sprintf("unexpected reply %v", v)
				c.h.Complete(g, "info")
				continue
			}
			g.Token = token
			c.h.Complete(g, "ok")
			time.Sleep(time.Duration(c.rnd.Intn(30)) * time.Millisecond)
		}
		if c.conn == nil {
			continue
		}
		rel := c.h.Invoke(&Op{Client: c.ID, Workload: g.Workload, Kind: "release", Key: lockKey, Token: g.Token, GrantID: g.ID, Node: c.port})
		rv, known, err := c.do("EVAL", releaseScript, "1", lockKey, strconv.FormatUint(g.Token, 10))
		if err != nil {
			rel.Err = err.Error()
			c.h.Complete(rel, outcome(known, err, false))
		} else {
			rel.Result = fmt.Sprint(rv)
			c.h.Complete(rel, "ok")
		}
	}
}

// RunWorkloads starts the clients; stop ends them; the returned WaitGroup is done once every client returned.
func RunWorkloads(cl *Cluster, h *History, stop <-chan struct{}, durable bool, ttl int, think time.Duration, nRegister, nMutex, nCounter, nTx, nScript int) *sync.WaitGroup {
	var wg sync.WaitGroup
	id := 0
	mk := func() *Client {
		id++
		return &Client{ID: id, cl: cl, h: h, durable: durable, timeout: 7 * time.Second, think: think, rnd: rand.New(rand.NewSource(time.Now().UnixNano() + int64(id)))}
	}
	for i := 0; i < nRegister; i++ {
		c := mk()
		wg.Add(1)
		go func() { defer wg.Done(); c.register(stop, 3, ttl) }()
	}
	for i := 0; i < nMutex; i++ {
		c := mk()
		wg.Add(1)
		go func() { defer wg.Done(); c.mutex(stop, ttl, 2) }()
	}
	for i := 0; i < nCounter; i++ {
		c := mk()
		wg.Add(1)
		go func() { defer wg.Done(); c.counter(stop) }()
	}
	for i := 0; i < nTx; i++ {
		c := mk()
		wg.Add(1)
		go func() { defer wg.Done(); c.txRegister(stop, 3, ttl) }()
	}
	for i := 0; i < nScript; i++ {
		c := mk()
		wg.Add(1)
		go func() { defer wg.Done(); c.scriptLocks(stop, 3, ttl, 2) }()
	}
	return &wg
}
