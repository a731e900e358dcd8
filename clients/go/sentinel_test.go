package ruvio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Failover discovery through the Sentinel protocol, tested against Debian's redis-sentinel and redis-server
// (Ruvio's coordinator, which will speak the same protocol, does not exist yet). The tests fail, not skip, when
// the tools are missing: clients/go/test.sh installs them.

type sentinelSetup struct {
	t        *testing.T
	nodes    []*proc // redis-servers: nodes[0] starts as the primary
	sentinel *proc
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is missing (apt-get install redis-server redis-sentinel; clients/go/test.sh does it as root): %v", name, err)
	}
	return p
}

func startSentinelSetup(t *testing.T) *sentinelSetup {
	redisServer := needTool(t, "redis-server")
	redisSentinel := needTool(t, "redis-sentinel")
	dir := t.TempDir()
	st := &sentinelSetup{t: t}
	mk := func(name string, extra ...string) *proc {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p, err := startProc(redisServer, d, append([]string{"--dir", d, "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"}, extra...)...)
		if err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		t.Cleanup(p.kill)
		return p
	}
	primary := mk("n0")
	replica := mk("n1", "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	st.nodes = []*proc{primary, replica}

	sdir := filepath.Join(dir, "sentinel")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(sdir, "sentinel.conf")
	s, err := startProcWith(redisSentinel, sdir, func(port int) []string {
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %d 1\n"+
			"sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 4000\n", port, sdir, primary.port)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{conf}
	})
	if err != nil {
		t.Fatalf("starting redis-sentinel: %v", err)
	}
	t.Cleanup(s.kill)
	st.sentinel = s
	// Ready when the replica is in sync and the sentinel knows it.
	st.waitSynced(replica)
	return st
}

func raw(t *testing.T, addr string, args ...any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cn, err := dialConn(ctx, &Options{DialTimeout: 5 * time.Second, Protocol: 2}, addr)
	if err != nil {
		return err
	}
	defer cn.close()
	r, err := cn.roundTrip(ctx, [][]any{args}, 5*time.Second)
	if err != nil {
		return err
	}
	return r[0]
}

func (st *sentinelSetup) waitSynced(replica *proc) {
	st.t.Helper()
	waitFor(st.t, 30*time.Second, func() bool {
		info, _ := raw(st.t, replica.Addr(), "INFO", "replication").(string)
		if !strings.Contains(info, "master_link_status:up") {
			return false
		}
		reps, _ := raw(st.t, st.sentinel.Addr(), "SENTINEL", "replicas", "mymaster").([]any)
		for _, r := range reps {
			m, _ := StringMap(r, nil)
			if m != nil && m["port"] == strconv.Itoa(replica.port) && !strings.Contains(fmt.Sprint(m["flags"]), "down") &&
				fmt.Sprint(m["master-link-status"]) == "ok" {
				return true
			}
		}
		return false
	})
}

// portOf asks the server the client is talking to for its port.
func portOf(ctx context.Context, c *Client) (string, error) {
	m, err := StringMap(c.Do(ctx, "CONFIG", "GET", "port"))
	if err != nil {
		return "", err
	}
	return fmt.Sprint(m["port"]), nil
}

func TestSentinelDiscoveryAndFailover(t *testing.T) {
	st := startSentinelSetup(t)
	ctx := testCtx(t)
	dead, _ := freePort() // a sentinel address that answers nothing: the client must go on to the next
	c := connect(t, Options{
		SentinelAddrs: []string{fmt.Sprintf("127.0.0.1:%d", dead), st.sentinel.Addr()},
		MasterName:    "mymaster", DialTimeout: 2 * time.Second, CommandTimeout: 2 * time.Second,
	})
	if p := chk(portOf(ctx, c))(t); p != strconv.Itoa(st.nodes[0].port) {
		t.Fatalf("talking to port %s, want the primary %d", p, st.nodes[0].port)
	}
	chk(c.Do(ctx, "SET", "fo:k", "1"))(t)

	// A failover (+switch-master): the client follows to the new primary and writes there.
	if r := raw(t, st.sentinel.Addr(), "SENTINEL", "FAILOVER", "mymaster"); r != "OK" {
		t.Fatalf("SENTINEL FAILOVER: %#v", r)
	}
	waitFor(t, 30*time.Second, func() bool {
		p, err := portOf(ctx, c)
		if err != nil || p != strconv.Itoa(st.nodes[1].port) {
			return false
		}
		_, err = c.Do(ctx, "SET", "fo:k", "2")
		return err == nil
	})
	if v, _, _ := c.Get(ctx, "fo:k"); v != "2" {
		t.Fatalf("after failover: %q", v)
	}

	// -READONLY: with the +switch-master watcher stopped, pooled connections still point at the old primary
	// (now a replica) after the next failover; the READONLY answer makes the client rediscover.
	st.waitSynced(st.nodes[0])
	c.disc.stop()
	for i := 0; i < 3; i++ { // keep a few connections to nodes[1] in the pool
		chk(c.Do(ctx, "SET", "fo:k", "3"))(t)
	}
	if r := raw(t, st.sentinel.Addr(), "SENTINEL", "FAILOVER", "mymaster"); r != "OK" {
		t.Fatalf("SENTINEL FAILOVER: %#v", r)
	}
	// Wait until nodes[1] is a replica (it answers READONLY to writes), without using the client.
	waitFor(t, 30*time.Second, func() bool {
		role, _ := raw(t, st.nodes[1].Addr(), "ROLE").([]any)
		return len(role) > 0 && role[0] == "slave"
	})
	sawReadOnly := false
	waitFor(t, 30*time.Second, func() bool {
		_, err := c.Do(ctx, "SET", "fo:k", "4")
		if errors.Is(err, ErrReadOnly) {
			sawReadOnly = true
		}
		return err == nil
	})
	if !sawReadOnly {
		t.Fatal("the pooled connection to the demoted primary never answered READONLY (test did not exercise it)")
	}
	if p := chk(portOf(ctx, c))(t); p != strconv.Itoa(st.nodes[0].port) {
		t.Fatalf("after READONLY: port %s, want %d", p, st.nodes[0].port)
	}
}

func TestSentinelRediscoversAfterThePrimaryDies(t *testing.T) {
	st := startSentinelSetup(t)
	ctx := testCtx(t)
	c := connect(t, Options{SentinelAddrs: []string{st.sentinel.Addr()}, MasterName: "mymaster",
		DialTimeout: time.Second, CommandTimeout: time.Second})
	chk(c.Do(ctx, "SET", "kill:k", "1"))(t)
	st.nodes[0].kill() // the primary is gone: the sentinel promotes the replica after down-after-milliseconds
	failures := 0
	waitFor(t, 60*time.Second, func() bool {
		_, err := c.Do(ctx, "SET", "kill:k", "2")
		if err != nil {
			failures++
			var ne *NetError
			var se *Error
			if !errors.As(err, &ne) && !errors.As(err, &se) {
				t.Fatalf("an unexpected kind of error: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return err == nil
	})
	if failures == 0 {
		t.Fatal("no command failed while the primary was dead: the test did not exercise the failover")
	}
	if p := chk(portOf(ctx, c))(t); p != strconv.Itoa(st.nodes[1].port) {
		t.Fatalf("port %s, want the promoted replica %d", p, st.nodes[1].port)
	}
	// Pub/sub follows too.
	sub, err := c.Subscribe(ctx, "kill:chan")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	chk(c.Publish(ctx, "kill:chan", "hi"))(t)
	expectMsg(t, sub, Message{Channel: "kill:chan", Payload: "hi"})
}
