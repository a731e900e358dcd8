package main

// The cluster: three coordinators (ruvio coordinator, or redis-sentinel), a primary and two replicas (ruvio or
// redis-server). Every process listens on 127.0.0.1 with a port of its own and runs under a uid of its own inside the
// suite's private network namespace, so nftables can cut exactly the pairs a partition names (see nemesis.go).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	nodeBasePort  = 7001
	coordBasePort = 26001
	nodeBaseUID   = 3101
	coordBaseUID  = 3001
	groupName     = "mymaster"
)

type Proc struct {
	Name   string
	Coord  bool
	Port   int
	UID    int
	Dir    string
	cmd    *exec.Cmd
	done   chan struct{}
	Paused bool
	Faked  bool // runs under libfaketime (clock nemesis)
}

func (p *Proc) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port) }

func (p *Proc) Alive() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

type Cluster struct {
	System      string // "ruvio" or "redis"
	Bin         string
	Durable     bool
	Root        string
	TTL         int // lease TTL (ms), for the configuration of timeouts
	DownAfter   int
	Nodes       []*Proc
	Coords      []*Proc
	mu          sync.Mutex
	Log         func(format string, a ...interface{})
	FakeTimeLib string
	DiskDirs    map[string]string // node name -> tmpfs mount for the disk-full nemesis
}

func NewCluster(system, bin, root string, durable bool, log func(string, ...interface{})) *Cluster {
	c := &Cluster{System: system, Bin: bin, Root: root, Durable: durable, DownAfter: 1000, Log: log, DiskDirs: map[string]string{}}
	for i := 0; i < 3; i++ {
		c.Nodes = append(c.Nodes, &Proc{Name: fmt.Sprintf("n%d", i+1), Port: nodeBasePort + i, UID: nodeBaseUID + i, Dir: filepath.Join(root, fmt.Sprintf("n%d", i+1))})
		c.Coords = append(c.Coords, &Proc{Name: fmt.Sprintf("c%d", i+1), Coord: true, Port: coordBasePort + i, UID: coordBaseUID + i, Dir: filepath.Join(root, fmt.Sprintf("c%d", i+1))})
	}
	return c
}

func (c *Cluster) All() []*Proc { return append(append([]*Proc{}, c.Nodes...), c.Coords...) }

func (c *Cluster) ByName(n string) *Proc {
	for _, p := range c.All() {
		if p.Name == n {
			return p
		}
	}
	return nil
}

func (c *Cluster) ByPort(port int) *Proc {
	for _, p := range c.Nodes {
		if p.Port == port {
			return p
		}
	}
	return nil
}

// The secrets of the harness's Ruvio groups: the nodes' built-in `coordinator` user (coordinator-pass), and the
// coordinators' login to each other (sentinel-user/sentinel-pass).
const (
	coordPass = "faults-coordinator-secret"
	peerPass  = "faults-peer-secret"
)

func (c *Cluster) nodeArgs(p *Proc, replicaOf int) (string, []string) {
	if c.System == "redis" {
		conf := filepath.Join(p.Dir, "redis.conf")
		s := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsave \"\"\nappendonly yes\nappendfsync always\nprotected-mode no\nlogfile %s\n",
			p.Port, p.Dir, filepath.Join(p.Dir, "log"))
		if replicaOf > 0 {
			s += fmt.Sprintf("replicaof 127.0.0.1 %d\n", replicaOf)
		}
		os.WriteFile(conf, []byte(s), 0o644)
		os.Chown(conf, p.UID, p.UID)
		return "redis-server", []string{conf}
	}
	// coordinator-pass: the built-in `coordinator` user the coordinators log in as (coordination commands).
	args := []string{"--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1", "--dir", p.Dir, "--appendonly", "yes", "--appendfsync", "always", "--coordinator-pass", coordPass}
	if replicaOf > 0 {
		args = append(args, "--replicaof", fmt.Sprintf("127.0.0.1 %d", replicaOf))
	}
	return c.Bin, args
}

func (c *Cluster) coordArgs(p *Proc, primary int) (string, []string) {
	conf := filepath.Join(p.Dir, "coordinator.conf")
	if c.System == "redis" {
		// redis-sentinel rewrites its file: write it once, keep it across restarts.
		if _, err := os.Stat(conf); err != nil {
			s := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nprotected-mode no\nlogfile %s\nsentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 10000\n",
				p.Port, p.Dir, filepath.Join(p.Dir, "log"), groupName, primary, groupName, c.DownAfter, groupName)
			os.WriteFile(conf, []byte(s), 0o644)
			os.Chown(conf, p.UID, p.UID)
		}
		return "redis-sentinel", []string{conf}
	}
	var peers []string
	for _, q := range c.Coords {
		peers = append(peers, q.Addr())
	}
	n := 0
	if c.Durable {
		n = 1
	}
	s := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\ncoordinator-peers %s\nsentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 10000\nsentinel durability-replicas %s %d\n",
		p.Port, p.Dir, strings.Join(peers, " "), groupName, primary, groupName, c.DownAfter, groupName, groupName, n)
	s += fmt.Sprintf("sentinel auth-user %s coordinator\nsentinel auth-pass %s %s\nsentinel sentinel-user coordinators\nsentinel sentinel-pass %s\n",
		groupName, groupName, coordPass, peerPass)
	os.WriteFile(conf, []byte(s), 0o644)
	return c.Bin, []string{"coordinator", "--config", conf}
}

// start launches p (a node following replicaOf, 0 = primary; or a coordinator) under its own uid.
func (c *Cluster) start(p *Proc, replicaOf int) error {
	os.MkdirAll(p.Dir, 0o755)
	os.Chown(p.Dir, p.UID, p.UID)
	var bin string
	var args []string
	if p.Coord {
		bin, args = c.coordArgs(p, nodeBasePort)
	} else {
		bin, args = c.nodeArgs(p, replicaOf)
	}
	cmd := exec.Command(bin, args...)
	logf, err := os.OpenFile(filepath.Join(c.Root, p.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== %s start %s %v\n", time.Now().Format(time.RFC3339Nano), bin, args)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(p.UID), Gid: uint32(p.UID)}, Pdeathsig: syscall.SIGKILL}
	cmd.Env = os.Environ()
	if p.Faked && c.FakeTimeLib != "" {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+c.FakeTimeLib, "FAKETIME_TIMESTAMP_FILE="+filepath.Join(c.Root, p.Name+".faketime"),
			"FAKETIME_CACHE_DURATION=1", "FAKETIME_DONT_FAKE_MONOTONIC=1")
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	p.Paused = false
	done := p.done
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	return nil
}

func (c *Cluster) waitUp(p *Proc, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return fmt.Errorf("%s exited (see %s.log)", p.Name, p.Name)
		}
		if v, err := oneShot(p.Addr(), time.Second, "PING"); err == nil && v == "PONG" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer PING within %v", p.Name, limit)
}

func (c *Cluster) Start() error {
	for i, p := range c.Nodes {
		rep := 0
		if i > 0 {
			rep = nodeBasePort
		}
		if err := c.start(p, rep); err != nil {
			return err
		}
		if err := c.waitUp(p, 30*time.Second); err != nil {
			return err
		}
	}
	for _, p := range c.Coords {
		if err := c.start(p, 0); err != nil {
			return err
		}
	}
	for _, p := range c.Coords {
		if err := c.waitUp(p, 30*time.Second); err != nil {
			return err
		}
	}
	return c.WaitHealthy(60 * time.Second)
}

func (c *Cluster) Signal(p *Proc, sig syscall.Signal) {
	if p.Alive() {
		p.cmd.Process.Signal(sig)
	}
}

func (c *Cluster) Kill(p *Proc) {
	if p.Paused {
		c.Signal(p, syscall.SIGCONT)
	}
	c.Signal(p, syscall.SIGKILL)
	if p.done != nil {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	}
	p.Paused = false
}

func (c *Cluster) Pause(p *Proc)  { c.Signal(p, syscall.SIGSTOP); p.Paused = true }
func (c *Cluster) Resume(p *Proc) { c.Signal(p, syscall.SIGCONT); p.Paused = false }

// Restart starts a dead process again; a node follows the primary the coordinators name now.
func (c *Cluster) Restart(p *Proc) error {
	if p.Alive() {
		return nil
	}
	rep := 0
	if !p.Coord {
		if m := c.MasterPort(); m > 0 && m != p.Port {
			rep = m
		} else {
			// The coordinators still name this node (or nobody): come back as it was; they re-point it if needed.
			rep = 0
		}
	}
	if err := c.start(p, rep); err != nil {
		return err
	}
	return c.waitUp(p, 30*time.Second)
}

// MasterPort asks the coordinators which node is the primary (the answer most of them give).
func (c *Cluster) MasterPort() int {
	votes := map[int]int{}
	for _, q := range c.Coords {
		if !q.Alive() || q.Paused {
			continue
		}
		if port := askMaster(q.Addr()); port > 0 {
			votes[port]++
		}
	}
	best, bestN := 0, 0
	for p, n := range votes {
		if n > bestN {
			best, bestN = p, n
		}
	}
	return best
}

func askMaster(addr string) int {
	v, err := oneShot(addr, time.Second, "SENTINEL", "get-master-addr-by-name", groupName)
	if err != nil {
		return 0
	}
	a, ok := v.([]interface{})
	if !ok || len(a) != 2 {
		return 0
	}
	s, _ := a[1].(string)
	port, _ := strconv.Atoi(s)
	return port
}

func (c *Cluster) info(addr, section string) string {
	v, err := oneShot(addr, 2*time.Second, "INFO", section)
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	return s
}

// Healthy: every process runs; all coordinators name the same primary, which says role:master; both other nodes
// are its replicas with the link up; with durability, both are in the coordinators' durability set.
func (c *Cluster) healthy() (bool, string) {
	for _, p := range c.All() {
		if !p.Alive() || p.Paused {
			return false, p.Name + " not running"
		}
	}
	m := 0
	for _, q := range c.Coords {
		port := askMaster(q.Addr())
		if port == 0 || (m != 0 && port != m) {
			return false, "coordinators disagree on the primary"
		}
		m = port
	}
	if infoField(c.info(fmt.Sprintf("127.0.0.1:%d", m), "replication"), "role") != "master" {
		return false, fmt.Sprintf("%d is not master", m)
	}
	for _, n := range c.Nodes {
		if n.Port == m {
			continue
		}
		inf := c.info(n.Addr(), "replication")
		if infoField(inf, "master_port") != strconv.Itoa(m) || infoField(inf, "master_link_status") != "up" {
			return false, n.Name + " does not follow the primary yet"
		}
	}
	if c.System == "ruvio" && c.Durable {
		for _, q := range c.Coords {
			g := infoField(c.info(q.Addr(), "coordinator"), "group0")
			cnt := 0
			if i := strings.Index(g, "durability_set="); i >= 0 {
				rest := g[i+len("durability_set="):]
				if j := strings.Index(rest, ",failover"); j >= 0 {
					rest = rest[:j]
				}
				cnt = strings.Count(rest, "127.0.0.1:")
			}
			if cnt < 2 {
				return false, q.Name + " has not both replicas in its durability set: " + g
			}
		}
	}
	return true, ""
}

func (c *Cluster) WaitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	why := ""
	for time.Now().Before(deadline) {
		ok, w := c.healthy()
		if ok {
			return nil
		}
		why = w
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("cluster not healthy within %v: %s", limit, why)
}

// RaftLeader: the coordinator the others name as raft leader (ruvio only).
func (c *Cluster) RaftLeader() *Proc {
	for _, q := range c.Coords {
		inf := c.info(q.Addr(), "coordinator")
		if infoField(inf, "raft_role") == "Leader" {
			return q
		}
	}
	return nil
}

func (c *Cluster) Stop() {
	for _, p := range c.All() {
		c.Kill(p)
	}
}
