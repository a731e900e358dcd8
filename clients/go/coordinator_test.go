package ruvio

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The client's own Sentinel discovery (Options.SentinelAddrs) against three `ruvio coordinator`s watching a Ruvio
// primary and two replicas: it finds the primary, makes a durable grant (DurableReplicas: 1), and after kill -9 of
// the primary it finds the new one, where the grant is held with its token.


// coordPass is the secret the nodes give their built-in `coordinator` user (coordinator-pass) and the coordinators log in with.
const coordPass = "test-coordinator-secret"

func TestSentinelDiscoveryThroughRuvioCoordinators(t *testing.T) {
	bin := ruvioBin(t)
	dir := t.TempDir()
	node := func(name string, extra ...string) *proc {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		// coordinator-pass: the built-in `coordinator` user the coordinators log in as (coordination commands).
		p, err := startProc(bin, d, append([]string{"--dir", d, "--appendonly", "yes", "--appendfsync", "always", "--coordinator-pass", coordPass}, extra...)...)
		if err != nil {
			t.Fatalf("starting ruvio: %v", err)
		}
		t.Cleanup(p.kill)
		return p
	}
	primary := node("n0")
	replicas := []*proc{
		node("n1", "--replicaof", fmt.Sprintf("127.0.0.1 %d", primary.port)),
		node("n2", "--replicaof", fmt.Sprintf("127.0.0.1 %d", primary.port)),
	}

	var ports, peers []string
	for i := 0; i < 3; i++ {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, strconv.Itoa(p))
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(p))
	}
	var coords []string
	for i, port := range ports {
		d := filepath.Join(dir, "coordinator-"+port)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(d, "coordinator.conf")
		text := fmt.Sprintf("port %s\nbind 127.0.0.1\ndir %s\ncoordinator-peers %s\nsentinel monitor mymaster 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds mymaster 1000\nsentinel durability-replicas mymaster 1\n"+
			"sentinel auth-user mymaster coordinator\nsentinel auth-pass mymaster %s\n"+
			"sentinel sentinel-user coordinators\nsentinel sentinel-pass test-peer-secret\n", port, d, strings.Join(peers, " "), primary.port, coordPass)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(port)
		c := &proc{bin: bin, mkArgs: func(int) []string { return []string{"coordinator", "--config", conf} }, port: n, dir: d,
			log: filepath.Join(d, "log")}
		if err := c.start(); err != nil {
			t.Fatalf("starting coordinator %d: %v", i, err)
		}
		t.Cleanup(c.kill)
		coords = append(coords, c.Addr())
	}
	// Ready when every coordinator lists both replicas.
	waitFor(t, 60*time.Second, func() bool {
		for _, a := range coords {
			reps, _ := raw(t, a, "SENTINEL", "replicas", "mymaster").([]any)
			if len(reps) != 2 {
				return false
			}
		}
		return true
	})

	// Durable writes count only the replicas a majority of the coordinators' write leases name (durable=1 on the
	// primary's INFO replication lines, docs/replication.md).
	waitFor(t, 60*time.Second, func() bool {
		info, _ := raw(t, primary.Addr(), "INFO", "replication").(string)
		return strings.Count(info, "durable=1") == 2
	})

	ctx := testCtx(t)
	c := connect(t, Options{SentinelAddrs: coords, MasterName: "mymaster", DurableReplicas: 1, DialTimeout: time.Second, CommandTimeout: 2 * time.Second})
	if p := chk(portOf(ctx, c))(t); p != strconv.Itoa(primary.port) {
		t.Fatalf("talking to port %s, want the primary %d", p, primary.port)
	}
	// A durable grant, as the README shows: answered once a replica holds it.
	token, ok := chk2(c.Lease(ctx, "job:nightly-report", 30*time.Second))(t)
	if !ok {
		t.Fatal("the durable grant was refused")
	}
	chk(c.Do(ctx, "SET", "coord:k", "1"))(t)

	primary.kill()
	failures := 0
	waitFor(t, 60*time.Second, func() bool {
		_, err := c.Do(ctx, "SET", "coord:k2", "2")
		if err != nil {
			failures++
			time.Sleep(100 * time.Millisecond)
		}
		return err == nil
	})
	if failures == 0 {
		t.Fatal("no command failed while the primary was dead: the test did not exercise the failover")
	}
	p := chk(portOf(ctx, c))(t)
	if p != strconv.Itoa(replicas[0].port) && p != strconv.Itoa(replicas[1].port) {
		t.Fatalf("after the failover: port %s, want one of the replicas %d %d", p, replicas[0].port, replicas[1].port)
	}
	addr, _ := raw(t, coords[0], "SENTINEL", "get-master-addr-by-name", "mymaster").([]any)
	if len(addr) != 2 || fmt.Sprint(addr[1]) != p {
		t.Fatalf("the coordinators name %v, the client talks to port %s", addr, p)
	}
	if v, _, _ := c.Get(ctx, "coord:k"); v != "1" {
		t.Fatalf("the write made before the failover: %q", v)
	}
	info, ok := chk2(c.LockInfo(ctx, "job:nightly-report"))(t)
	if !ok || len(info.Holders) != 1 || info.Holders[0].Token != token {
		t.Fatalf("the durable grant after the failover: %+v (ok %v), want token %d", info, ok, token)
	}
}
