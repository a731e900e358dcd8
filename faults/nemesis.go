package main

// Nemeses. Partitions: every process runs under a uid of its own and listens on a port of its own, so an nftables
// rule in the output hook "packets of uid A to port of B" cuts the connections A opens to B; dropping both
// directions (A to B's port, B to A's port) cuts the pair whoever opened the connection (a TCP connection is dead
// once one direction drops). Ruvio's outgoing connections (a replica's link, a coordinator's probes) do not bind a
// source address, so address pairs alone could not tell the senders apart. The workload clients run in the harness
// (uid 0).

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const clientUID = 0

func nft(args ...string) error {
	out, err := exec.Command("nft", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nft %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func nftSetup() error {
	nft("delete", "table", "inet", "faults")
	if err := nft("add", "table", "inet", "faults"); err != nil {
		return err
	}
	return nft("add", "chain", "inet", "faults", "out", "{ type filter hook output priority 0; policy accept; }")
}

func nftHeal() error { return nft("flush", "chain", "inet", "faults", "out") }

type endpoint struct {
	uid  int
	port int // 0: the clients (they accept no connections)
}

func ep(p *Proc) endpoint { return endpoint{p.UID, p.Port} }

var clients = endpoint{clientUID, 0}

// cut drops traffic between every member of a and every member of b.
func cut(a, b []endpoint) error {
	for _, x := range a {
		for _, y := range b {
			for _, d := range [][2]endpoint{{x, y}, {y, x}} {
				if d[1].port == 0 {
					continue
				}
				if err := nft("add", "rule", "inet", "faults", "out", "meta", "skuid", fmt.Sprint(d[0].uid), "tcp", "dport", fmt.Sprint(d[1].port), "drop"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func eps(ps ...*Proc) []endpoint {
	var out []endpoint
	for _, p := range ps {
		out = append(out, ep(p))
	}
	return out
}

type Nemesis struct {
	Name string
	Run  func(n *NemesisRunner) (string, error) // injects the fault, returns what it did
}

type NemesisRunner struct {
	cl        *Cluster
	h         *History
	hold      time.Duration // how long a fault lasts
	pauseFor  time.Duration // SIGSTOP length (> lease TTL and > down-after-milliseconds)
	rnd       *rand.Rand
	log       func(string, ...interface{})
	Counts    map[string]int
	Unhealed  map[string]int
	Failovers int
}

func (n *NemesisRunner) primary() *Proc {
	if p := n.cl.ByPort(n.cl.MasterPort()); p != nil {
		return p
	}
	return n.cl.Nodes[0]
}

func (n *NemesisRunner) replicas(p *Proc) []*Proc {
	var out []*Proc
	for _, q := range n.cl.Nodes {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

func (n *NemesisRunner) killRestart(p *Proc) {
	n.cl.Kill(p)
	time.Sleep(n.hold)
	if err := n.cl.Restart(p); err != nil {
		n.log("restart %s: %v", p.Name, err)
	}
}

func (n *NemesisRunner) pause(p *Proc) {
	n.cl.Pause(p)
	time.Sleep(n.pauseFor)
	n.cl.Resume(p)
}

func (n *NemesisRunner) partition(a, b []endpoint) error {
	if err := cut(a, b); err != nil {
		return err
	}
	time.Sleep(n.hold + n.pauseFor)
	return nftHeal()
}

func (n *NemesisRunner) coordsExcept(x *Proc) []*Proc {
	var out []*Proc
	for _, c := range n.cl.Coords {
		if c != x {
			out = append(out, c)
		}
	}
	return out
}

func allNemeses(system string) []Nemesis {
	ns := []Nemesis{
		{"kill-primary", func(n *NemesisRunner) (string, error) { p := n.primary(); n.killRestart(p); return p.Name, nil }},
		{"pause-primary", func(n *NemesisRunner) (string, error) { p := n.primary(); n.pause(p); return p.Name, nil }},
		{"partition-primary-from-coordinators", func(n *NemesisRunner) (string, error) {
			p := n.primary()
			return p.Name, n.partition(eps(p), eps(n.cl.Coords...))
		}},
		{"partition-primary-from-everyone", func(n *NemesisRunner) (string, error) {
			p := n.primary()
			return p.Name, n.partition(eps(p), append(append(eps(n.replicas(p)...), eps(n.cl.Coords...)...), clients))
		}},
		{"kill-replica", func(n *NemesisRunner) (string, error) {
			r := n.replicas(n.primary())[n.rnd.Intn(2)]
			n.killRestart(r)
			return r.Name, nil
		}},
		{"partition-majority-minority", func(n *NemesisRunner) (string, error) {
			// Minority: the primary and one coordinator. Majority: both replicas and two coordinators (+ clients).
			p := n.primary()
			c := n.cl.Coords[n.rnd.Intn(3)]
			return p.Name + "+" + c.Name + " | rest", n.partition(eps(p, c), append(eps(n.replicas(p)...), eps(n.coordsExcept(c)...)...))
		}},
		{"kill-coordinator", func(n *NemesisRunner) (string, error) {
			c := n.cl.Coords[n.rnd.Intn(3)]
			n.killRestart(c)
			return c.Name, nil
		}},
		{"partition-bridge", func(n *NemesisRunner) (string, error) {
			// {primary, c1} and {replicas, c3} cannot talk; c2 talks to both sides (the bridge).
			p := n.primary()
			c := n.cl.Coords
			return fmt.Sprintf("%s+%s | %s bridge | replicas+%s", p.Name, c[0].Name, c[1].Name, c[2].Name),
				n.partition(eps(p, c[0]), append(eps(n.replicas(p)...), ep(c[2])))
		}},
		{"pause-replica", func(n *NemesisRunner) (string, error) {
			r := n.replicas(n.primary())[n.rnd.Intn(2)]
			n.pause(r)
			return r.Name, nil
		}},
		{"pause-coordinator", func(n *NemesisRunner) (string, error) {
			c := n.cl.Coords[n.rnd.Intn(3)]
			n.pause(c)
			return c.Name, nil
		}},
		{"partition-replica-minority", func(n *NemesisRunner) (string, error) {
			// A replica and one coordinator cut off from the rest.
			p := n.primary()
			r := n.replicas(p)[n.rnd.Intn(2)]
			c := n.cl.Coords[n.rnd.Intn(3)]
			var rest []*Proc
			for _, q := range n.cl.All() {
				if q != r && q != c {
					rest = append(rest, q)
				}
			}
			return r.Name + "+" + c.Name + " | rest", n.partition(eps(r, c), eps(rest...))
		}},
	}
	if system == "ruvio" {
		ns = append(ns, Nemesis{"kill-raft-leader", func(n *NemesisRunner) (string, error) {
			l := n.cl.RaftLeader()
			if l == nil {
				return "", fmt.Errorf("no raft leader found")
			}
			n.killRestart(l)
			return l.Name, nil
		}})
	}
	return ns
}

func clockNemeses() []Nemesis {
	return []Nemesis{
		{"clock-jump", func(n *NemesisRunner) (string, error) {
			// Wall clock of one node (primary or replica) jumps forward or back; monotonic clocks are left alone,
			// as after an NTP step.
			nodes := n.cl.Nodes
			p := nodes[n.rnd.Intn(len(nodes))]
			jump := []string{"+60s", "-60s", "+600s", "-600s"}[n.rnd.Intn(4)]
			f := filepath.Join(n.cl.Root, p.Name+".faketime")
			if err := os.WriteFile(f, []byte(jump+"\n"), 0o644); err != nil {
				return "", err
			}
			time.Sleep(n.hold + n.pauseFor)
			os.WriteFile(f, []byte("+0\n"), 0o644)
			return p.Name + " " + jump, nil
		}},
	}
}

func diskNemesis() Nemesis {
	return Nemesis{"disk-full-replica", func(n *NemesisRunner) (string, error) {
		r := n.replicas(n.primary())[n.rnd.Intn(2)]
		mnt, ok := n.cl.DiskDirs[r.Name]
		if !ok {
			return "", fmt.Errorf("%s has no small disk", r.Name)
		}
		fill := filepath.Join(mnt, "filler")
		// Fill the tmpfs (dd stops at ENOSPC), hold, then free it.
		exec.Command("dd", "if=/dev/zero", "of="+fill, "bs=1M", "count=1024").Run()
		time.Sleep(n.hold + n.pauseFor)
		os.Remove(fill)
		return r.Name, nil
	}}
}

// heal: every paused process resumed, partitions healed, dead processes restarted; then wait for a healthy cluster.
func (n *NemesisRunner) heal() error {
	nftHeal()
	for _, p := range n.cl.All() {
		if p.Paused {
			n.cl.Resume(p)
		}
	}
	for _, p := range n.cl.All() {
		if !p.Alive() {
			n.cl.Restart(p)
		}
	}
	return n.cl.WaitHealthy(60 * time.Second)
}

// Mix runs two nemeses at once (a process fault and a partition, say) and counts it as "a+b".
func Mix(a, b Nemesis) Nemesis {
	return Nemesis{a.Name + "+" + b.Name, func(n *NemesisRunner) (string, error) {
		type r struct {
			what string
			err  error
		}
		ch := make(chan r, 1)
		go func() { w, e := b.Run(n); ch <- r{w, e} }()
		w1, e1 := a.Run(n)
		x := <-ch
		if e1 == nil {
			e1 = x.err
		}
		return w1 + " & " + x.what, e1
	}}
}

func (n *NemesisRunner) Do(nm Nemesis) {
	before := n.cl.MasterPort()
	n.h.Event("nemesis-start", nm.Name)
	what, err := nm.Run(n)
	if err != nil {
		what += " error: " + err.Error()
	}
	n.h.Event("nemesis-stop", nm.Name+" "+what)
	n.Counts[nm.Name]++
	if err := n.heal(); err != nil {
		n.Unhealed[nm.Name]++
		n.h.Event("not-healthy", nm.Name+": "+err.Error())
		n.log("after %s: %v", nm.Name, err)
		for _, p := range n.cl.All() {
			if p.Paused {
				p.cmd.Process.Signal(syscall.SIGCONT)
			}
		}
	}
	after := n.cl.MasterPort()
	if after != before && after != 0 {
		n.Failovers++
		n.h.Event("failover", fmt.Sprintf("%d -> %d", before, after))
	}
	n.log("nemesis %s (%s) done; primary %d -> %d", nm.Name, what, before, after)
}
