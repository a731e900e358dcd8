// Command faults: a Jepsen-style fault suite for Ruvio (and the Redis + Sentinel lock pattern, for comparison).
// Run it through scripts/faults.sh, which creates the private network namespace this needs.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

type Phase struct {
	Name     string
	System   string
	Durable  bool
	Duration time.Duration
	Nemeses  []string // quick mode: this order; long mode: random among them
}

type PhaseResult struct {
	Phase     string         `json:"phase"`
	Seconds   int            `json:"seconds"`
	Nemeses   map[string]int `json:"nemeses"`
	NotHealed map[string]int `json:"not_healed,omitempty"`
	Failovers int            `json:"failovers"`
	Attempted map[string]int `json:"attempted"`
	Acked     map[string]int `json:"acknowledged"`
	Verdicts  []*Verdict     `json:"verdicts"`
	Error     string         `json:"error,omitempty"`
	MustPass  bool           `json:"must_pass"`
}

func main() {
	bin := flag.String("bin", os.Getenv("RUVIO_BIN"), "ruvio binary")
	out := flag.String("out", "", "results folder")
	quick := flag.Bool("quick", false, "the ~5 minute run")
	minutes := flag.Float64("minutes", 0, "long run: total minutes")
	only := flag.String("only", "", "run only the phases whose name contains this")
	re := flag.String("recheck", "", "run the checkers again on a phase folder's history.jsonl, and exit")
	flag.Parse()
	if *re != "" {
		recheck(*re)
		return
	}
	if *bin == "" {
		fail("RUVIO_BIN is not set (the ruvio binary to test)")
	}
	if st, err := os.Stat(*bin); err != nil || st.IsDir() {
		fail("RUVIO_BIN=%s: not a file", *bin)
	}
	if *out == "" {
		fail("-out is required")
	}
	os.MkdirAll(*out, 0o755)
	logf, _ := os.Create(filepath.Join(*out, "run.log"))
	log := func(f string, a ...interface{}) {
		s := time.Now().Format("15:04:05.000") + " " + fmt.Sprintf(f, a...)
		fmt.Println(s)
		fmt.Fprintln(logf, s)
	}
	if err := nftSetup(); err != nil {
		fail("nftables: %v", err)
	}
	defer nftHeal()

	var phases []Phase
	coreNem := []string{"kill-primary", "pause-primary", "partition-primary-from-coordinators", "partition-primary-from-everyone"}
	allNem := []string{}
	for _, n := range allNemeses("ruvio") {
		allNem = append(allNem, n.Name)
	}
	if *quick {
		phases = []Phase{
			{"ruvio-durable", "ruvio", true, 150 * time.Second, []string{"kill-primary", "partition-primary-from-coordinators", "pause-primary", "kill-raft-leader", "partition-primary-from-everyone", "kill-replica", "clock-jump", "partition-majority-minority", "partition-bridge", "disk-full-replica", "pause-replica", "kill-coordinator", "partition-replica-minority", "pause-coordinator"}},
			{"ruvio-async", "ruvio", false, 40 * time.Second, coreNem},
			{"redis-sentinel", "redis", false, 50 * time.Second, coreNem},
		}
	} else {
		total := time.Duration(*minutes * float64(time.Minute))
		if total <= 0 {
			fail("give -quick or -minutes N")
		}
		withClock := append(append([]string{}, allNem...), "clock-jump", "disk-full-replica")
		phases = []Phase{
			{"ruvio-durable", "ruvio", true, total * 6 / 10, withClock},
			{"ruvio-async", "ruvio", false, total * 2 / 10, allNem},
			{"redis-sentinel", "redis", false, total * 2 / 10, coreNem},
		}
	}
	runStart := time.Now()
	var results []*PhaseResult
	bad := false
	for _, ph := range phases {
		if *only != "" && !strings.Contains(ph.Name, *only) {
			continue
		}
		log("=== phase %s (%s, durable=%v, %v)", ph.Name, ph.System, ph.Durable, ph.Duration)
		r := runPhase(ph, *bin, filepath.Join(*out, ph.Name), *quick, log)
		results = append(results, r)
		for _, v := range r.Verdicts {
			if r.MustPass && v.Valid == "no" {
				bad = true
			}
		}
		if r.Error != "" && r.MustPass {
			bad = true
		}
	}
	j, _ := json.MarshalIndent(map[string]interface{}{"started": runStart.UTC().Format(time.RFC3339), "args": os.Args[1:], "phases": results}, "", "  ")
	os.WriteFile(filepath.Join(*out, "summary.json"), j, 0o644)
	table := summaryTable(results)
	os.WriteFile(filepath.Join(*out, "summary.md"), []byte(table), 0o644)
	fmt.Println(table)
	if bad {
		fmt.Println("FAIL: a checker found a violation in a mode that promises safety (see above and the results folder)")
		os.Exit(1)
	}
	fmt.Println("PASS: every checker of the durable Ruvio run holds (anomalies of the other modes are reported above)")
}

func fail(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "faults: "+f+"\n", a...)
	os.Exit(2)
}

func runPhase(ph Phase, bin, dir string, quick bool, log func(string, ...interface{})) *PhaseResult {
	res := &PhaseResult{Phase: ph.Name, Nemeses: map[string]int{}, Attempted: map[string]int{}, Acked: map[string]int{}, MustPass: ph.System == "ruvio" && ph.Durable}
	os.RemoveAll(dir)
	os.MkdirAll(dir, 0o755)
	cl := NewCluster(ph.System, bin, dir, ph.Durable, log)
	if lib := "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"; fileExists(lib) && ph.System == "ruvio" {
		cl.FakeTimeLib = lib
		for _, p := range cl.Nodes {
			p.Faked = true
			os.WriteFile(filepath.Join(dir, p.Name+".faketime"), []byte("+0\n"), 0o644)
		}
	}
	if ph.System == "ruvio" && ph.Durable && containsStr(ph.Nemeses, "disk-full-replica") {
		// Each node's data folder is a small tmpfs of its own, so the disk-full nemesis can fill one.
		size := "128m"
		if !quick {
			size = "512m"
		}
		for _, p := range cl.Nodes {
			os.MkdirAll(p.Dir, 0o755)
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", p.Dir).CombinedOutput(); err != nil {
				log("tmpfs for %s: %v %s (disk-full nemesis skipped)", p.Name, err, out)
				continue
			}
			cl.DiskDirs[p.Name] = p.Dir
		}
	}
	defer func() {
		cl.Stop()
		for _, d := range cl.DiskDirs {
			exec.Command("umount", "-l", d).Run()
		}
	}()
	start := time.Now()
	if err := cl.Start(); err != nil {
		res.Error = "cluster did not start: " + err.Error()
		log("%s", res.Error)
		return res
	}
	h := NewHistory()
	stop := make(chan struct{})
	ttl := 2000
	// Long runs: the register clients pause between iterations so a phase's history stays within what Porcupine
	// checks (see maxPorcupineOps); the mutex and counter clients run flat out.
	think := time.Duration(0)
	if !quick {
		think = time.Duration(float64(150*time.Millisecond) * ph.Duration.Minutes() / 10)
		if think < 10*time.Millisecond {
			think = 10 * time.Millisecond
		}
	}
	wg := RunWorkloads(cl, h, stop, ph.Durable, ttl, think, 6, ph4(ph), ph3(ph), phDurable(ph), phDurable(ph))
	nr := &NemesisRunner{cl: cl, h: h, hold: 3 * time.Second, pauseFor: 5 * time.Second, rnd: rand.New(rand.NewSource(time.Now().UnixNano())), log: log, Counts: map[string]int{}, Unhealed: map[string]int{}}
	byName := map[string]Nemesis{}
	for _, n := range append(append(allNemeses(ph.System), clockNemeses()...), diskNemesis()) {
		byName[n.Name] = n
	}
	var names []string
	for _, n := range ph.Nemeses {
		if _, ok := byName[n]; ok && (n != "clock-jump" || cl.FakeTimeLib != "") && (n != "disk-full-replica" || len(cl.DiskDirs) > 0) {
			names = append(names, n)
		}
	}
	time.Sleep(3 * time.Second) // the workload runs undisturbed first
	deadline := start.Add(ph.Duration)
	i := 0
	for time.Now().Before(deadline) && len(names) > 0 {
		var nm Nemesis
		if quick {
			nm = byName[names[i%len(names)]]
		} else {
			nm = byName[names[nr.rnd.Intn(len(names))]]
			// Mixed at random: one time in four, a partition at the same time as a process or clock fault.
			var parts []string
			for _, x := range names {
				if strings.HasPrefix(x, "partition") {
					parts = append(parts, x)
				}
			}
			if !strings.HasPrefix(nm.Name, "partition") && len(parts) > 0 && nr.rnd.Intn(4) == 0 {
				nm = Mix(nm, byName[parts[nr.rnd.Intn(len(parts))]])
			}
		}
		i++
		nr.Do(nm)
		time.Sleep(2 * time.Second)
	}
	close(stop)
	waitTimeout(wg, 20*time.Second)
	nftHeal()
	if err := nr.heal(); err != nil {
		log("final heal: %v", err)
	}
	finals := finalReads(cl, h, ph.Durable, log)
	all := h.Ops()
	writeJSONL(filepath.Join(dir, "history.jsonl.gz"), all)
	res.Seconds = int(time.Since(start).Seconds())
	res.Nemeses, res.NotHealed, res.Failovers = nr.Counts, nr.Unhealed, nr.Failovers
	for _, o := range all {
		if o.Workload == "nemesis" || o.Kind == "final-read" {
			continue
		}
		k := o.Workload + "/" + o.Kind
		res.Attempted[k]++
		if o.Status == "ok" {
			res.Acked[k]++
		}
	}
	// Checkers.
	res.Verdicts = append(res.Verdicts, checkLost(all, finals))
	if ph.System == "ruvio" {
		res.Verdicts = append(res.Verdicts, checkTokenOrder(all), checkFence(all, finals))
	}
	res.Verdicts = append(res.Verdicts, checkHolders(all))
	t0 := time.Now()
	porcTimeout := 60 * time.Second
	if !quick {
		porcTimeout = 5 * time.Minute
	}
	res.Verdicts = append(res.Verdicts, checkLinearizable(all, finals, ph.Durable, porcTimeout, filepath.Join(dir, "linearizability.html")))
	log("porcupine took %v", time.Since(t0).Round(time.Millisecond))
	vf, _ := os.Create(filepath.Join(dir, "verdicts.txt"))
	for _, v := range res.Verdicts {
		line := fmt.Sprintf("%-34s valid=%-7s checked=%-6d anomalies=%d", v.Name, v.Valid, v.Checked, v.Anomalies)
		log("%s %s", ph.Name, line)
		fmt.Fprintln(vf, line)
		for _, n := range v.Notes {
			fmt.Fprintln(vf, "    "+n)
		}
		if v.Stretch != nil {
			fmt.Fprintf(vf, "  shortest stretch of history showing it (%d ops):\n", len(v.Stretch))
			log("  %s: %s; shortest stretch of history showing it:", v.Name, v.Notes[0])
			for i, o := range v.Stretch {
				b, _ := json.Marshal(o)
				fmt.Fprintln(vf, "    "+string(b))
				if i < 16 {
					log("    %s", b)
				} else if i == 16 {
					log("    ... (%d ops in all: %s)", len(v.Stretch), filepath.Join(dir, "verdicts.txt"))
				}
			}
		}
	}
	vf.Close()
	pass := true
	for _, v := range res.Verdicts {
		pass = pass && v.Valid == "yes"
	}
	if pass {
		// Keep the logs and the history, not the nodes' data.
		for _, p := range cl.All() {
			if _, disk := cl.DiskDirs[p.Name]; !disk {
				os.RemoveAll(p.Dir)
			}
		}
	}
	vj, _ := json.MarshalIndent(res.Verdicts, "", "  ")
	os.WriteFile(filepath.Join(dir, "verdicts.json"), vj, 0o644)
	return res
}

func ph4(ph Phase) int {
	if ph.System == "redis" {
		return 0 // workloads 2 and 3 use Ruvio's commands
	}
	return 3
}
func ph3(ph Phase) int {
	if ph.System == "redis" {
		return 0
	}
	return 2
}

// phDurable: clients of workloads 4 and 5 (transactions and scripts on durable connections): Ruvio's durable
// phase only.
func phDurable(ph Phase) int {
	if ph.System != "ruvio" || !ph.Durable {
		return 0
	}
	return 1
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func waitTimeout(wg interface{ Wait() }, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// finalReads: after healing, read the registers, the counter and the set from the primary.
func finalReads(cl *Cluster, h *History, durable bool, log func(string, ...interface{})) map[string]*Op {
	finals := map[string]*Op{}
	addr := fmt.Sprintf("127.0.0.1:%d", cl.MasterPort())
	read := func(key string, args ...string) {
		op := h.Invoke(&Op{Workload: wlOf(key), Kind: "final-read", Key: key, Client: 999})
		var v interface{}
		var err error
		for try := 0; try < 10; try++ {
			if v, err = oneShot(addr, 5*time.Second, args...); err == nil {
				break
			}
			time.Sleep(time.Second)
			addr = fmt.Sprintf("127.0.0.1:%d", cl.MasterPort())
		}
		if err != nil {
			op.Err = err.Error()
			h.Complete(op, "fail")
			log("final read of %s: %v", key, err)
			return
		}
		switch x := v.(type) {
		case string:
			op.Result = x
		case int64:
			op.Result = fmt.Sprint(x)
		case []interface{}:
			var s []string
			for _, e := range x {
				s = append(s, fmt.Sprint(e))
			}
			sort.Strings(s)
			op.Result = strings.Join(s, ",")
		}
		h.Complete(op, "ok")
		finals[key] = op
	}
	for k := 0; k < 3; k++ {
		read(fmt.Sprintf("reg:%d", k), "GET", fmt.Sprintf("reg:%d", k))
	}
	if cl.System == "ruvio" {
		read("counter", "GET", "counter")
		read("set", "HKEYS", "set")
	}
	return finals
}

func wlOf(key string) string {
	if strings.HasPrefix(key, "reg:") {
		return "register"
	}
	return "counter"
}

func summaryTable(rs []*PhaseResult) string {
	var b strings.Builder
	b.WriteString("| phase | seconds | nemeses (count) | failovers | ops attempted / acknowledged | checker verdicts (anomalies) |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		var nem []string
		for k, v := range r.Nemeses {
			s := fmt.Sprintf("%s %d", k, v)
			if r.NotHealed[k] > 0 {
				s += fmt.Sprintf(" (%d not healed in 60 s)", r.NotHealed[k])
			}
			nem = append(nem, s)
		}
		sort.Strings(nem)
		var ops []string
		var ks []string
		for k := range r.Attempted {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			ops = append(ops, fmt.Sprintf("%s %d/%d", k, r.Attempted[k], r.Acked[k]))
		}
		var vs []string
		for _, v := range r.Verdicts {
			vs = append(vs, fmt.Sprintf("%s: %s (%d)", v.Name, v.Valid, v.Anomalies))
		}
		if r.Error != "" {
			vs = append(vs, "ERROR: "+r.Error)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s | %s |\n", r.Phase, r.Seconds, strings.Join(nem, ", "), r.Failovers, strings.Join(ops, ", "), strings.Join(vs, "; "))
	}
	return b.String()
}
