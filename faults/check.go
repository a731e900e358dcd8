package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

type Verdict struct {
	Name      string   `json:"checker"`
	Valid     string   `json:"valid"` // "yes", "no", "unknown"
	Checked   int      `json:"checked"`
	Anomalies int      `json:"anomalies"`
	Notes     []string `json:"notes,omitempty"`
	Stretch   []*Op    `json:"-"`
}

func (v *Verdict) flag(note string, stretch []*Op) {
	v.Anomalies++
	v.Valid = "no"
	if len(v.Notes) < 20 {
		v.Notes = append(v.Notes, note)
	}
	// Keep the shortest stretch that shows a failure.
	if stretch != nil && (v.Stretch == nil || len(stretch) < len(v.Stretch)) {
		v.Stretch = stretch
	}
}

func suffix(key string) string {
	if i := strings.LastIndex(key, ":"); i >= 0 {
		return key[i+1:]
	}
	return key
}

// stretch: the ops touching the same key family (lock:K and reg:K) and the nemesis events between the first
// invocation and the last completion of the ops involved.
func stretch(all []*Op, involved ...*Op) []*Op {
	lo, hi := int64(math.MaxInt64), int64(0)
	fam := map[string]bool{}
	for _, o := range involved {
		if o.Inv < lo {
			lo = o.Inv
		}
		if o.Cmp > hi {
			hi = o.Cmp
		}
		fam[o.Workload+"/"+suffix(o.Key)] = true
	}
	var out []*Op
	for _, o := range all {
		if o.Cmp < lo || o.Inv > hi {
			continue
		}
		if o.Kind == "grant" && o.Status == "fail" {
			continue // a lock that was busy: noise
		}
		if o.Workload == "nemesis" || fam[o.Workload+"/"+suffix(o.Key)] {
			out = append(out, o)
		}
	}
	return out
}

func filter(ops []*Op, f func(*Op) bool) []*Op {
	var out []*Op
	for _, o := range ops {
		if f(o) {
			out = append(out, o)
		}
	}
	return out
}

func byKey(ops []*Op) map[string][]*Op {
	m := map[string][]*Op{}
	for _, o := range ops {
		m[o.Key] = append(m[o.Key], o)
	}
	return m
}

// (a) No acknowledged write is missing after the run: the register's final value is not older than an
// acknowledged write; the counter is at least the number of acknowledged INCRs; the set has every acknowledged
// element.
func checkLost(all []*Op, finals map[string]*Op) *Verdict {
	v := &Verdict{Name: "a-no-lost-acknowledged-writes", Valid: "yes"}
	writes := filter(all, func(o *Op) bool { return o.Kind == "write" })
	for key, ws := range byKey(writes) {
		f := finals[key]
		if f == nil || f.Status != "ok" {
			v.Valid = "unknown"
			v.Notes = append(v.Notes, "no final read of "+key)
			continue
		}
		var fw *Op
		for _, w := range ws {
			if w.Value == f.Result && f.Result != "" {
				fw = w
			}
		}
		for _, w := range ws {
			if w.Status != "ok" || w.Result != "1" {
				continue
			}
			v.Checked++
			lost := false
			if fw == nil {
				lost = true
			} else if fw != w && fw.Cmp < w.Inv {
				lost = true // the final value was written before w even started
			} else if fw != w && w.Token > 0 && fw.Token < w.Token {
				lost = true
			}
			if lost {
				inv := []*Op{w, f}
				if fw != nil {
					inv = append(inv, fw)
				}
				v.flag(fmt.Sprintf("%s: acknowledged write %q (op %d, token %d) is gone; final value %q", key, w.Value, w.ID, w.Token, f.Result), stretchTail(all, w, f))
				_ = inv
			}
		}
	}
	if f := finals["counter"]; f != nil {
		acked, unknown := 0, 0
		for _, o := range all {
			if o.Kind == "incr" {
				if o.Status == "ok" {
					acked++
				} else if o.Status == "info" {
					unknown++
				}
			}
		}
		final, _ := strconv.Atoi(f.Result)
		if f.Status != "ok" {
			v.Valid = "unknown"
		} else {
			v.Checked += acked
			if final < acked {
				v.flag(fmt.Sprintf("counter: %d acknowledged INCRs, final value %d (%d lost)", acked, final, acked-final), nil)
				v.Anomalies += acked - final - 1
			} else if final > acked+unknown {
				v.flag(fmt.Sprintf("counter: final value %d above %d acknowledged + %d unknown INCRs", final, acked, unknown), nil)
			}
		}
	}
	if f := finals["set"]; f == nil || f.Status != "ok" {
		if len(filter(all, func(o *Op) bool { return o.Kind == "sadd" && o.Status == "ok" })) > 0 {
			v.Valid = "unknown"
			v.Notes = append(v.Notes, "no final read of the set")
		}
	} else {
		have := map[string]bool{}
		for _, e := range strings.Split(f.Result, ",") {
			have[e] = true
		}
		for _, o := range all {
			if o.Kind == "sadd" && o.Status == "ok" {
				v.Checked++
				if !have[o.Value] {
					v.flag(fmt.Sprintf("set: acknowledged element %s (op %d) missing", o.Value, o.ID), stretchTail(all, o, f))
				}
			}
		}
	}
	return v
}

// stretchTail: the ops of the key from the lost write to its first few successors, plus the nemesis events.
func stretchTail(all []*Op, w, f *Op) []*Op {
	var out []*Op
	n := 0
	for _, o := range all {
		if o.Inv < w.Inv || (o.Workload != "nemesis" && suffix(o.Key) != suffix(w.Key) && o.Kind != "final-read") {
			continue
		}
		if o.Workload != w.Workload && o.Workload != "nemesis" && o.Kind != "final-read" {
			continue
		}
		out = append(out, o)
		n++
		if n > 30 {
			break
		}
	}
	return out
}

// (b) Tokens of acknowledged grants increase in real-time order on each key: a grant acknowledged before another
// was invoked has the lower token.
func checkTokenOrder(all []*Op) *Verdict {
	v := &Verdict{Name: "b-tokens-increase-in-real-time", Valid: "yes"}
	grants := filter(all, func(o *Op) bool { return o.Kind == "grant" && o.Status == "ok" && o.Token > 0 })
	for _, gs := range byKey(grants) {
		byCmp := append([]*Op{}, gs...)
		sort.Slice(byCmp, func(i, j int) bool { return byCmp[i].Cmp < byCmp[j].Cmp })
		sort.Slice(gs, func(i, j int) bool { return gs[i].Inv < gs[j].Inv })
		var best *Op
		j := 0
		for _, g := range gs {
			for j < len(byCmp) && byCmp[j].Cmp < g.Inv {
				if best == nil || byCmp[j].Token > best.Token {
					best = byCmp[j]
				}
				j++
			}
			v.Checked++
			if best != nil && g.Token <= best.Token {
				v.flag(fmt.Sprintf("%s: grant op %d token %d invoked after grant op %d token %d was acknowledged", g.Key, g.ID, g.Token, best.ID, best.Token), stretch(all, best, g))
			}
		}
	}
	return v
}

// (c) The fenced register never accepted a lower token after a higher one was acknowledged, and holds the last
// acknowledged write (its final value was written with a token at least the highest acknowledged one).
func checkFence(all []*Op, finals map[string]*Op) *Verdict {
	v := &Verdict{Name: "c-fenced-register", Valid: "yes"}
	writes := filter(all, func(o *Op) bool { return o.Kind == "write" && o.Token > 0 })
	for key, ws := range byKey(writes) {
		acc := filter(ws, func(o *Op) bool { return o.Status == "ok" && o.Result == "1" })
		byCmp := append([]*Op{}, acc...)
		sort.Slice(byCmp, func(i, j int) bool { return byCmp[i].Cmp < byCmp[j].Cmp })
		sort.Slice(acc, func(i, j int) bool { return acc[i].Inv < acc[j].Inv })
		var best *Op
		j := 0
		for _, w := range acc {
			for j < len(byCmp) && byCmp[j].Cmp < w.Inv {
				if best == nil || byCmp[j].Token > best.Token {
					best = byCmp[j]
				}
				j++
			}
			v.Checked++
			if best != nil && w.Token < best.Token {
				v.flag(fmt.Sprintf("%s: IFGT with token %d (op %d) accepted after token %d (op %d) was acknowledged", key, w.Token, w.ID, best.Token, best.ID), stretch(all, best, w))
			}
		}
		f := finals[key]
		if f == nil || f.Status != "ok" || len(acc) == 0 {
			continue
		}
		var max *Op
		for _, w := range acc {
			if max == nil || w.Token > max.Token {
				max = w
			}
		}
		var fw *Op
		for _, w := range ws {
			if w.Value == f.Result {
				fw = w
			}
		}
		v.Checked++
		if fw == nil || fw.Token < max.Token || fw.Status == "fail" || (fw.Status == "ok" && fw.Result == "0") {
			v.flag(fmt.Sprintf("%s: final value %q is not the last acknowledged write (token %d, %q)", key, f.Result, max.Token, max.Value), stretchTail(all, max, f))
		}
	}
	return v
}

// (d) Never more holders than the limit (1 for a lease): a grant surely holds from its acknowledgement until its
// TTL from its invocation or until its release was invoked, whichever is first; more surely-holding grants of one
// key at one instant than its limit is a violation.
func checkHolders(all []*Op) *Verdict {
	v := &Verdict{Name: "d-no-two-holders", Valid: "yes"}
	relInv := map[int64]int64{}
	for _, o := range all {
		if o.Kind == "release" {
			if t, ok := relInv[o.GrantID]; !ok || o.Inv < t {
				relInv[o.GrantID] = o.Inv
			}
		}
	}
	type iv struct {
		s, e int64
		g    *Op
	}
	grants := filter(all, func(o *Op) bool { return o.Kind == "grant" && o.Status == "ok" })
	for key, gs := range byKey(grants) {
		var ivs []iv
		for _, g := range gs {
			e := g.Inv + int64(g.TTL)*int64(time.Millisecond)
			if r, ok := relInv[g.ID]; ok && r < e {
				e = r
			}
			v.Checked++
			if e > g.Cmp {
				ivs = append(ivs, iv{g.Cmp, e, g})
			}
		}
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].s < ivs[j].s })
		var open []iv
		for _, x := range ivs {
			keep := open[:0]
			for _, o := range open {
				if o.e > x.s {
					keep = append(keep, o)
				}
			}
			open = append(keep, x)
			if len(open) > x.g.Limit {
				var inv []*Op
				var toks []string
				for _, o := range open {
					inv = append(inv, o.g)
					toks = append(toks, fmt.Sprintf("op %d token %d", o.g.ID, o.g.Token))
				}
				v.flag(fmt.Sprintf("%s: %d holders at once (limit %d): %s", key, len(open), x.g.Limit, strings.Join(toks, ", ")), stretch(all, inv...))
			}
		}
	}
	return v
}

// (e) The register history is linearizable (Porcupine). A register holds (fence, value): IFGT(t, v) writes when t
// is at least the fence (Ruvio); a plain SET always writes (Redis). Unknown outcomes may or may not have happened.
type regIn struct {
	read  bool
	token uint64
	val   string
	plain bool
}
type regOut struct {
	unknown bool
	ok      bool // IFGT answered 1
	val     string
}
type regState struct {
	fence uint64
	val   string
}

var regModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		m := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range h {
			k := o.Metadata.(string)
			if _, ok := m[k]; !ok {
				keys = append(keys, k)
			}
			m[k] = append(m[k], o)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, m[k])
		}
		return out
	},
	Init: func() interface{} { return regState{} },
	Step: func(s, in, out interface{}) (bool, interface{}) {
		st, i, o := s.(regState), in.(regIn), out.(regOut)
		if i.read {
			return o.val == st.val, st
		}
		applies := i.plain || i.token >= st.fence
		next := st
		if applies {
			next = regState{fence: i.token, val: i.val}
		}
		if o.unknown {
			return true, next // (Step must pick one; the NondeterministicModel below handles both)
		}
		return o.ok == applies, next
	},
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(regIn), out.(regOut)
		if i.read {
			return fmt.Sprintf("read -> %q", o.val)
		}
		return fmt.Sprintf("write(%d, %q) -> ok=%v unknown=%v", i.token, i.val, o.ok, o.unknown)
	},
}

// Unknown writes either took effect or did not: a nondeterministic step.
var regNDModel = porcupine.NondeterministicModel{
	Partition: regModel.Partition,
	Init:      func() []interface{} { return []interface{}{regState{}} },
	Step: func(s, in, out interface{}) []interface{} {
		st, i, o := s.(regState), in.(regIn), out.(regOut)
		if i.read {
			if o.val == st.val {
				return []interface{}{st}
			}
			return nil
		}
		applies := i.plain || i.token >= st.fence
		next := st
		if applies {
			next = regState{fence: i.token, val: i.val}
		}
		if o.unknown {
			return []interface{}{st, next}
		}
		if o.ok == applies {
			return []interface{}{next}
		}
		return nil
	},
	DescribeOperation: regModel.DescribeOperation,
}

const maxPorcupineOps = 300000

func checkLinearizable(all []*Op, finals map[string]*Op, durable bool, timeout time.Duration, vizPath string) *Verdict {
	v := &Verdict{Name: "e-register-linearizable", Valid: "yes"}
	var hist []porcupine.Operation
	for _, o := range all {
		switch {
		case o.Kind == "write":
			out := regOut{}
			ret := o.Cmp
			switch {
			case o.Status == "ok":
				out.ok = o.Result == "1"
			case o.Status == "info":
				out.unknown = true
				ret = math.MaxInt64 / 2
			default:
				continue // known not to have run
			}
			hist = append(hist, porcupine.Operation{ClientId: o.Client, Input: regIn{token: o.Token, val: o.Value, plain: o.Token == 0}, Call: o.Inv, Output: out, Return: ret, Metadata: o.Key})
		case o.Kind == "read" && o.Status == "ok", o.Kind == "final-read" && strings.HasPrefix(o.Key, "reg:") && o.Status == "ok":
			hist = append(hist, porcupine.Operation{ClientId: o.Client, Input: regIn{read: true}, Call: o.Inv, Output: regOut{val: o.Result}, Return: o.Cmp, Metadata: o.Key})
		}
	}
	v.Checked = len(hist)
	// One check per key, so the anomaly count is the number of keys whose history is not linearizable.
	model := regNDModel.ToModel()
	for _, part := range model.Partition(hist) {
		key := part[0].Metadata.(string)
		if len(part) > maxPorcupineOps {
			// Porcupine's memory grows with the history's length times its search; a few hundred thousand
			// operations per key is what this machine checks in seconds. Longer runs throttle their clients.
			if v.Valid == "yes" {
				v.Valid = "unknown"
			}
			v.Notes = append(v.Notes, fmt.Sprintf("%s: %d operations, more than the %d Porcupine is given; not checked", key, len(part), maxPorcupineOps))
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(model, part, timeout)
		switch res {
		case porcupine.Ok:
		case porcupine.Unknown:
			if v.Valid == "yes" {
				v.Valid = "unknown"
			}
			v.Notes = append(v.Notes, fmt.Sprintf("%s: Porcupine gave up after %v", key, timeout))
		case porcupine.Illegal:
			path := strings.TrimSuffix(vizPath, ".html") + "-" + strings.ReplaceAll(key, ":", "") + ".html"
			porcupine.VisualizePath(model, info, path)
			v.flag(fmt.Sprintf("%s: not linearizable (%s shows the longest linearizable prefixes)", key, path), illegalStretch(all, key, info))
		}
	}
	return v
}

// illegalStretch: the ops of the key that overlap the first operation no partial linearization could include,
// going back to the end of the longest linearizable prefix.
func illegalStretch(all []*Op, key string, info porcupine.LinearizationInfo) []*Op {
	longest := 0
	for _, p := range info.PartialLinearizations() {
		for _, l := range p {
			if len(l) > longest {
				longest = len(l)
			}
		}
	}
	var ops []*Op
	for _, o := range all {
		if o.Key == key && (o.Kind == "write" && o.Status != "fail" || (o.Kind == "read" || o.Kind == "final-read") && o.Status == "ok") {
			ops = append(ops, o)
		}
	}
	if longest >= len(ops) || len(ops) == 0 {
		return nil
	}
	lo := longest - 3
	if lo < 0 {
		lo = 0
	}
	hi := longest + 3
	if hi > len(ops) {
		hi = len(ops)
	}
	return stretch(all, ops[lo:hi]...)
}
