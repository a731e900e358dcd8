package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"sort"
	"sync"
	"time"
)

// Op is one operation of the history: invoked at Inv, completed at Cmp (nanoseconds since the run started, real
// time). Status: "ok" (acknowledged), "fail" (known not to have happened, or not granted), "info" (unknown outcome:
// timeout, connection lost, or an error after which the write may be applied).
type Op struct {
	ID       int64  `json:"id"`
	Client   int    `json:"client"`
	Workload string `json:"workload"`
	Kind     string `json:"kind"`
	Key      string `json:"key,omitempty"`
	Token    uint64 `json:"token,omitempty"`
	Value    string `json:"value,omitempty"`
	Result   string `json:"result,omitempty"`
	Status   string `json:"status"`
	Err      string `json:"err,omitempty"`
	Node     int    `json:"node,omitempty"` // port of the node that answered
	TTL      int    `json:"ttl,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	GrantID  int64  `json:"grant,omitempty"` // a release: which grant it releases
	Inv      int64  `json:"inv"`
	Cmp      int64  `json:"cmp"`
}

type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []*Op
	next  int64
}

func NewHistory() *History { return &History{start: time.Now()} }

func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Invoke records the start of an operation and returns it; the caller fills the outcome and calls Complete.
func (h *History) Invoke(op *Op) *Op {
	h.mu.Lock()
	h.next++
	op.ID = h.next
	op.Inv = h.Now()
	op.Cmp = -1
	h.ops = append(h.ops, op)
	h.mu.Unlock()
	return op
}

func (h *History) Complete(op *Op, status string) {
	h.mu.Lock()
	op.Cmp = h.Now()
	op.Status = status
	h.mu.Unlock()
}

func (h *History) Event(kind, what string) {
	op := h.Invoke(&Op{Workload: "nemesis", Kind: kind, Value: what})
	h.Complete(op, "ok")
}

func (h *History) Ops() []*Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*Op, len(h.ops))
	for i, o := range h.ops {
		c := *o
		if c.Cmp < 0 { // never completed (the run ended first): unknown
			c.Cmp = h.Now()
			c.Status = "info"
		}
		out[i] = &c
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Inv < out[j].Inv })
	return out
}

func writeJSONL(path string, ops []*Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	z := gzip.NewWriter(f)
	w := bufio.NewWriter(z)
	enc := json.NewEncoder(w)
	for _, o := range ops {
		enc.Encode(o)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return z.Close()
}
