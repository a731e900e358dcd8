package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// recheck runs the checkers again on a phase's recorded history (history.jsonl.gz) (faults -recheck results/.../ruvio-durable).
func recheck(dir string) {
	var z io.Reader
	if f, err := os.Open(filepath.Join(dir, "history.jsonl.gz")); err == nil {
		defer f.Close()
		if z, err = gzip.NewReader(f); err != nil {
			fail("%v", err)
		}
	} else if f, err := os.Open(filepath.Join(dir, "history.jsonl")); err == nil {
		defer f.Close()
		z = f
	} else {
		fail("%v", err)
	}
	var all []*Op
	finals := map[string]*Op{}
	sc := bufio.NewScanner(z)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		o := &Op{}
		if err := json.Unmarshal(sc.Bytes(), o); err != nil {
			fail("%v", err)
		}
		all = append(all, o)
		if o.Kind == "final-read" {
			finals[o.Key] = o
		}
	}
	tokens := false
	for _, o := range all {
		tokens = tokens || o.Token > 0
	}
	vs := []*Verdict{checkLost(all, finals)}
	if tokens {
		vs = append(vs, checkTokenOrder(all), checkFence(all, finals))
	}
	vs = append(vs, checkHolders(all), checkLinearizable(all, finals, true, 60*time.Second, filepath.Join(os.TempDir(), "recheck.html")))
	for _, v := range vs {
		fmt.Printf("%-34s valid=%-7s checked=%-6d anomalies=%d\n", v.Name, v.Valid, v.Checked, v.Anomalies)
		for _, n := range v.Notes {
			fmt.Println("    " + n)
		}
		for _, o := range v.Stretch {
			b, _ := json.Marshal(o)
			fmt.Println("    " + string(b))
		}
	}
}
