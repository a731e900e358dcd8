package main

// The checkers on hand-made histories: each must pass a correct history and flag the violation it is for.

import (
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func op(id int64, kind, key string, token uint64, val, result, status string, inv, cmp int64) *Op {
	return &Op{ID: id, Workload: "register", Kind: kind, Key: key, Token: token, Value: val, Result: result, Status: status, Inv: inv * ms, Cmp: cmp * ms, TTL: 1000, Limit: 1}
}

func finalsOf(val string) map[string]*Op {
	return map[string]*Op{"reg:0": {Kind: "final-read", Key: "reg:0", Result: val, Status: "ok", Inv: 10000 * ms, Cmp: 10001 * ms}}
}

func good() []*Op {
	return []*Op{
		op(1, "grant", "lock:0", 10, "", "", "ok", 0, 5),
		op(2, "write", "reg:0", 10, "a", "1", "ok", 6, 8),
		{ID: 3, Workload: "register", Kind: "release", Key: "lock:0", Token: 10, GrantID: 1, Status: "ok", Result: "1", Inv: 9 * ms, Cmp: 10 * ms},
		op(4, "grant", "lock:0", 20, "", "", "ok", 11, 15),
		op(5, "read", "reg:0", 20, "", "a", "ok", 16, 17),
		op(6, "write", "reg:0", 20, "b", "1", "ok", 18, 20),
	}
}

func TestCheckersPassACorrectHistory(t *testing.T) {
	h := good()
	for _, v := range []*Verdict{checkLost(h, finalsOf("b")), checkTokenOrder(h), checkFence(h, finalsOf("b")), checkHolders(h),
		checkLinearizable(append(h, finalsOf("b")["reg:0"]), finalsOf("b"), true, 10*time.Second, t.TempDir()+"/x.html")} {
		if v.Valid != "yes" {
			t.Errorf("%s: %s %v", v.Name, v.Valid, v.Notes)
		}
	}
}

func TestLostWriteIsFlagged(t *testing.T) {
	h := good()
	f := finalsOf("a") // the acknowledged "b" is gone
	if v := checkLost(h, f); v.Valid != "no" {
		t.Errorf("a: %v", v.Valid)
	}
	if v := checkFence(h, f); v.Valid != "no" {
		t.Errorf("c: %v", v.Valid)
	}
	if v := checkLinearizable(append(h, f["reg:0"]), f, true, 10*time.Second, t.TempDir()+"/x.html"); v.Valid != "no" {
		t.Errorf("e: %v", v.Valid)
	}
}

func TestTokenGoingBackIsFlagged(t *testing.T) {
	h := good()
	h[3].Token = 5 // granted after token 10 was acknowledged, but lower
	if v := checkTokenOrder(h); v.Valid != "no" || v.Stretch == nil {
		t.Errorf("b: %v", v.Valid)
	}
}

func TestLowerTokenAcceptedIsFlagged(t *testing.T) {
	h := good()
	h = append(h, op(7, "write", "reg:0", 15, "c", "1", "ok", 30, 31))
	if v := checkFence(h, finalsOf("c")); v.Valid != "no" {
		t.Errorf("c: %v", v.Valid)
	}
}

func TestTwoHoldersAreFlagged(t *testing.T) {
	h := good()
	h = append(h, op(8, "grant", "lock:0", 30, "", "", "ok", 16, 19)) // while token 20 surely holds
	v := checkHolders(h)
	if v.Valid != "no" || v.Stretch == nil {
		t.Errorf("d: %v", v.Valid)
	}
	// An expired holder is no holder: a grant after its TTL is fine.
	h2 := good()[:4]
	h2[3].Inv, h2[3].Cmp = 2000*ms, 2001*ms
	h2 = h2[:1]
	h2 = append(h2, op(9, "grant", "lock:0", 30, "", "", "ok", 1001, 1002))
	if v := checkHolders(h2); v.Valid != "yes" {
		t.Errorf("d flagged an expired holder: %v", v.Notes)
	}
}

func TestStaleReadIsNotLinearizable(t *testing.T) {
	h := good()
	h = append(h, op(10, "read", "reg:0", 0, "", "a", "ok", 25, 26)) // "b" was acknowledged at 20
	if v := checkLinearizable(h, finalsOf("b"), true, 10*time.Second, t.TempDir()+"/x.html"); v.Valid != "no" {
		t.Errorf("e: %v", v.Valid)
	}
	// An unknown write may or may not have happened.
	h2 := good()
	h2 = append(h2, op(11, "write", "reg:0", 30, "d", "", "info", 21, 22), op(12, "read", "reg:0", 0, "", "d", "ok", 40, 41))
	if v := checkLinearizable(h2, nil, true, 10*time.Second, t.TempDir()+"/x.html"); v.Valid != "yes" {
		t.Errorf("e rejected an unknown write that happened: %v", v.Notes)
	}
}

func TestLostCounterAndSetAreFlagged(t *testing.T) {
	h := []*Op{
		{ID: 1, Workload: "counter", Kind: "incr", Key: "counter", Status: "ok", Result: "1"},
		{ID: 2, Workload: "counter", Kind: "incr", Key: "counter", Status: "ok", Result: "2"},
		{ID: 3, Workload: "counter", Kind: "sadd", Key: "set", Value: "e1", Status: "ok"},
	}
	f := map[string]*Op{"counter": {Result: "1", Status: "ok"}, "set": {Result: "", Status: "ok"}}
	v := checkLost(h, f)
	if v.Valid != "no" || v.Anomalies != 2 {
		t.Errorf("a: %v %d %v", v.Valid, v.Anomalies, v.Notes)
	}
}

// Tokens reach the harness as integers (LEASE, SEMAPHORE) or, from scripts, as exact decimal strings.
func TestTokenOfReadsIntegersAndScriptStrings(t *testing.T) {
	for _, c := range []struct {
		in   interface{}
		want uint64
		ok   bool
	}{
		{int64(42), 42, true},
		{"9007199254740993", 9007199254740993, true},
		{"8444249301319680001", 8444249301319680001, true},
		{"x", 0, false},
		{nil, 0, false},
		{int64(0), 0, false},
	} {
		if got, ok := tokenOf(c.in); got != c.want || ok != c.ok {
			t.Errorf("tokenOf(%v) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
