package ruvio

// The conformance runner: reads the cross-language corpus from $CONFORMANCE_DIR at run time (it is not part of
// this module) and runs its wire, scenario and guard cases with this client. Launched by
// conformance/runners/go.sh with CONFORMANCE_RESULTS set, it writes one JSON line per case and fails only when
// it cannot run; without CONFORMANCE_RESULTS (clients/go/test.sh), a failed case fails the test.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type cfFile struct {
	Format string            `json:"format"`
	Cases  []json.RawMessage `json:"cases"`
}

type cfCase struct {
	ID         string            `json:"id"`
	Protocol   string            `json:"protocol"`
	Hex        string            `json:"hex"`
	Expect     json.RawMessage   `json:"expect"`
	Incomplete bool              `json:"incomplete"`
	Invalid    bool              `json:"invalid"`
	Args       []json.RawMessage `json:"args"`
	Protocols  []string          `json:"protocols"`
	Steps      []cfStep          `json:"steps"`
	Server     string            `json:"server"`
}

type cfStep struct {
	Do             string          `json:"do"`
	Args           []string        `json:"args"`
	Conn           string          `json:"conn"`
	Typed          bool            `json:"typed"`
	Expect         json.RawMessage `json:"expect"`
	Save           string          `json:"save"`
	UntilMs        string          `json:"until_ms"`
	Async          string          `json:"async"`
	ID             string          `json:"id"`
	MinElapsedMs   string          `json:"min_elapsed_ms"`
	Ms             string          `json:"ms"`
	Guard          string          `json:"guard"`
	Key            string          `json:"key"`
	TTLMs          string          `json:"ttl_ms"`
	MaxHoldMs      string          `json:"max_hold_ms"`
	WithinMs       string          `json:"within_ms"`
	BeforeDeadline bool            `json:"before_deadline"`
}

type cfResult struct {
	Case   string `json:"case"`
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
}

func TestConformance(t *testing.T) {
	dir := os.Getenv("CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("CONFORMANCE_DIR is not set: the corpus is not part of this module (clients/go/test.sh and conformance/runners/go.sh set it)")
	}
	if !filepath.IsAbs(dir) {
		t.Fatalf("CONFORMANCE_DIR=%s must be absolute", dir)
	}
	resultsPath := os.Getenv("CONFORMANCE_RESULTS")
	addr := conformanceAddr
	if addr == "" {
		addr = startServer(t).Addr()
	}
	var runID [4]byte
	if _, err := rand.Read(runID[:]); err != nil {
		t.Fatal(err)
	}
	r := &cfRunner{t: t, addr: addr, runID: hex.EncodeToString(runID[:])}

	var files []string
	for _, sub := range []string{"wire", "scenarios", "guard"} {
		fs, err := filepath.Glob(filepath.Join(dir, sub, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(fs)
		files = append(files, fs...)
	}
	if len(files) == 0 {
		t.Fatalf("no corpus files under %s", dir)
	}
	// Cases are listed in corpus order; scenario runs go 8 at a time (their keys never collide), the rest one by one.
	type job struct {
		run      func() cfResult
		parallel bool
	}
	var jobs []job
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var file cfFile
		if err := json.Unmarshal(raw, &file); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, rc := range file.Cases {
			var c cfCase
			if err := json.Unmarshal(rc, &c); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch file.Format {
			case "wire-decode":
				jobs = append(jobs, job{run: func() cfResult { return r.decodeCase(c) }})
			case "wire-encode":
				jobs = append(jobs, job{run: func() cfResult { return r.encodeCase(c) }})
			case "scenario":
				protos := c.Protocols
				if len(protos) == 0 {
					protos = []string{"2"}
				}
				for _, p := range protos {
					p := p
					jobs = append(jobs, job{run: func() cfResult { return r.scenario(c, p) }, parallel: true})
				}
			case "guard":
				jobs = append(jobs, job{run: func() cfResult { return r.guardCase(c) }})
			default:
				t.Fatalf("%s: unknown format %q", f, file.Format)
			}
		}
	}
	results := make([]cfResult, len(jobs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for i, j := range jobs {
		if !j.parallel {
			wg.Wait() // keep the sequential ones apart from the parallel runs
			results[i] = j.run()
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func(i int, j job) {
			defer wg.Done()
			results[i] = j.run()
			<-slots
		}(i, j)
	}
	wg.Wait()
	failed := 0
	var out bytes.Buffer
	for _, res := range results {
		line, _ := json.Marshal(res)
		out.Write(line)
		out.WriteByte('\n')
		if res.Result != "pass" {
			failed++
			if resultsPath == "" {
				t.Errorf("%s: %s", res.Case, res.Detail)
			} else {
				t.Logf("FAIL %s: %s", res.Case, res.Detail)
			}
		}
	}
	t.Logf("conformance: %d cases, %d failed", len(results), failed)
	if resultsPath != "" {
		if err := os.WriteFile(resultsPath, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type cfRunner struct {
	t     *testing.T
	addr  string
	runID string
}

func pass(id string) cfResult { return cfResult{Case: id, Result: "pass"} }
func fail(id string, format string, a ...any) cfResult {
	return cfResult{Case: id, Result: "fail", Detail: fmt.Sprintf(format, a...)}
}

// ---- wire vectors ----

func (r *cfRunner) decodeCase(c cfCase) cfResult {
	b, err := hex.DecodeString(c.Hex)
	if err != nil {
		return fail(c.ID, "bad hex: %v", err)
	}
	br := bufio.NewReader(bytes.NewReader(b))
	v, err := readExact(br)
	var pe *ProtocolError
	switch {
	case c.Incomplete:
		if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			return pass(c.ID)
		}
		return fail(c.ID, "incomplete input: got value %#v, error %v; want a request for more bytes", v, err)
	case c.Invalid:
		if errors.As(err, &pe) {
			return pass(c.ID)
		}
		return fail(c.ID, "invalid input: got value %#v, error %v; want a protocol error", v, err)
	}
	if err != nil {
		return fail(c.ID, "decode error: %v", err)
	}
	if br.Buffered() != 0 {
		return fail(c.ID, "%d bytes left after the value", br.Buffered())
	}
	var want map[string]any
	if err := json.Unmarshal(c.Expect, &want); err != nil {
		return fail(c.ID, "bad expect: %v", err)
	}
	if why := modelMatch(v, want); why != "" {
		return fail(c.ID, "%s", why)
	}
	return pass(c.ID)
}

func (r *cfRunner) encodeCase(c cfCase) cfResult {
	args := make([]any, len(c.Args))
	for i, a := range c.Args {
		var s string
		if json.Unmarshal(a, &s) == nil {
			args[i] = s
			continue
		}
		var h struct{ Hex string }
		if err := json.Unmarshal(a, &h); err != nil {
			return fail(c.ID, "bad argument %s", a)
		}
		b, err := hex.DecodeString(h.Hex)
		if err != nil {
			return fail(c.ID, "bad hex argument: %v", err)
		}
		args[i] = b
	}
	got, err := appendCommand(nil, args)
	if err != nil {
		return fail(c.ID, "encode: %v", err)
	}
	if hex.EncodeToString(got) != strings.ToLower(c.Hex) {
		return fail(c.ID, "encoded %q, want %s", got, c.Hex)
	}
	return pass(c.ID)
}

// modelMatch compares an exact decoded value with a model value (section 1 of the corpus README); "" if equal.
func modelMatch(v any, want map[string]any) string {
	typ, _ := want["type"].(string)
	str := func(k string) string { s, _ := want[k].(string); return s }
	items := func(k string) []any { a, _ := want[k].([]any); return a }
	switch typ {
	case "nil":
		if v == nil {
			return ""
		}
	case "simple":
		if s, ok := v.(simpleString); ok && string(s) == str("value") {
			return ""
		}
	case "error":
		if e, ok := v.(*Error); ok && e.Message == str("text") && (str("code") == "" || e.Code == str("code")) {
			return ""
		}
	case "integer":
		if n, ok := v.(int64); ok && strconv.FormatInt(n, 10) == str("value") {
			return ""
		}
	case "bulk":
		if s, ok := v.(string); ok {
			if h := str("hex"); h != "" {
				if hex.EncodeToString([]byte(s)) == strings.ToLower(h) {
					return ""
				}
			} else if s == str("value") {
				return ""
			}
		}
	case "double":
		if f, ok := v.(float64); ok {
			switch str("value") {
			case "inf":
				if math.IsInf(f, 1) {
					return ""
				}
			case "-inf":
				if math.IsInf(f, -1) {
					return ""
				}
			case "nan":
				if math.IsNaN(f) {
					return ""
				}
			default:
				if w, err := strconv.ParseFloat(str("value"), 64); err == nil && w == f {
					return ""
				}
			}
		}
	case "boolean":
		if b, ok := v.(bool); ok && b == want["value"] {
			return ""
		}
	case "verbatim":
		if vb, ok := v.(verbatim); ok && vb.format == str("format") && vb.text == str("value") {
			return ""
		}
	case "bignumber":
		if n, ok := v.(*big.Int); ok && n.String() == str("value") {
			return ""
		}
	case "array", "set", "push":
		var got []any
		var ok bool
		switch typ {
		case "array":
			got, ok = v.([]any)
		case "set":
			var s setValue
			s, ok = v.(setValue)
			got = s
		case "push":
			var p Push
			p, ok = v.(Push)
			got = p
		}
		w := items("items")
		if ok && len(got) == len(w) {
			for i := range w {
				wm, _ := w[i].(map[string]any)
				if why := modelMatch(got[i], wm); why != "" {
					return fmt.Sprintf("%s item %d: %s", typ, i, why)
				}
			}
			return ""
		}
	case "map":
		m, ok := v.(mapValue)
		w := items("entries")
		if ok && len(m) == len(w) {
			for i := range w {
				pair, _ := w[i].([]any)
				if len(pair) != 2 {
					return "bad model entry"
				}
				km, _ := pair[0].(map[string]any)
				vm, _ := pair[1].(map[string]any)
				if why := modelMatch(m[i][0], km); why != "" {
					return fmt.Sprintf("map key %d: %s", i, why)
				}
				if why := modelMatch(m[i][1], vm); why != "" {
					return fmt.Sprintf("map value %d: %s", i, why)
				}
			}
			return ""
		}
	default:
		return fmt.Sprintf("unknown model type %q", typ)
	}
	return fmt.Sprintf("got %s, want %v", describe(v), want)
}

func describe(v any) string {
	switch x := v.(type) {
	case *Error:
		return fmt.Sprintf("error %q", x.Message)
	case simpleString:
		return fmt.Sprintf("simple %q", string(x))
	case string:
		return fmt.Sprintf("bulk %q", x)
	}
	return fmt.Sprintf("%T %#v", v, v)
}

// ---- scenarios ----

type cfRun struct {
	r       *cfRunner
	addr    string
	proto   int
	prefix  string
	conns   map[string]*Client
	saved   map[string]string
	pending map[string]chan cfReply
	// the connection each async command runs on
	pendingConn map[string]string
	guards      map[string]*cfGuard
	srv         *proc
}

type cfReply struct {
	v    any
	err  error
	sent time.Time
	at   time.Time
}

type cfGuard struct {
	c      *Client
	l      *Lock
	sent   time.Time
	ttl    time.Duration
	lostAt chan time.Time
}

func (run *cfRun) close() {
	for _, g := range run.guards {
		if g.l != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = g.l.Release(ctx)
			cancel()
		}
		g.c.Close()
	}
	for _, c := range run.conns {
		c.Close()
	}
}

func (run *cfRun) conn(name string) (*Client, error) {
	if name == "" {
		name = "a"
	}
	if c, ok := run.conns[name]; ok {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, Options{Addr: run.addr, Protocol: run.proto, PoolSize: 1, CommandTimeout: 40 * time.Second})
	if err != nil {
		return nil, err
	}
	run.conns[name] = c
	return c, nil
}

func (run *cfRun) subst(s string) string {
	s = strings.ReplaceAll(s, "{p}", run.prefix)
	for strings.Contains(s, "{tok:") {
		i := strings.Index(s, "{tok:")
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		name := s[i+5 : i+j]
		s = s[:i] + run.saved[name] + s[i+j+1:]
	}
	return s
}

func (r *cfRunner) scenario(c cfCase, proto string) cfResult {
	id := c.ID + "@resp" + proto
	p, _ := strconv.Atoi(proto)
	run := &cfRun{r: r, addr: r.addr, proto: p, prefix: fmt.Sprintf("cf:%s:go:%s:", r.runID, id),
		conns: map[string]*Client{}, saved: map[string]string{}, pending: map[string]chan cfReply{}, pendingConn: map[string]string{}, guards: map[string]*cfGuard{}}
	defer run.close()
	for i, st := range c.Steps {
		if why := run.step(st); why != "" {
			return fail(id, "step %d (%s %v): %s", i, st.Do, st.Args, why)
		}
	}
	return pass(id)
}

func (r *cfRunner) guardCase(c cfCase) cfResult {
	run := &cfRun{r: r, addr: r.addr, proto: 2, prefix: fmt.Sprintf("cf:%s:go:%s:", r.runID, c.ID),
		conns: map[string]*Client{}, saved: map[string]string{}, pending: map[string]chan cfReply{}, pendingConn: map[string]string{}, guards: map[string]*cfGuard{}}
	if c.Server == "own" {
		bin := os.Getenv("RUVIO_BIN")
		if bin == "" {
			return fail(c.ID, "RUVIO_BIN is not set: this case needs its own server")
		}
		dir, err := os.MkdirTemp("", "ruvio-cf-go-")
		if err != nil {
			return fail(c.ID, "%v", err)
		}
		defer os.RemoveAll(dir)
		srv, err := startProc(bin, dir, "--dir", filepath.Join(dir, "data"))
		if err != nil {
			return fail(c.ID, "starting its own server: %v", err)
		}
		defer srv.kill()
		run.srv, run.addr = srv, srv.Addr()
	}
	defer run.close()
	for i, st := range c.Steps {
		if why := run.step(st); why != "" {
			return fail(c.ID, "step %d (%s %v): %s", i, st.Do, st.Args, why)
		}
	}
	return pass(c.ID)
}

func msOf(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Millisecond
}

func (run *cfRun) step(st cfStep) string {
	switch st.Do {
	case "command":
		c, err := run.conn(st.Conn)
		if err != nil {
			return fmt.Sprintf("connect: %v", err)
		}
		args := make([]string, len(st.Args))
		for i, a := range st.Args {
			args[i] = run.subst(a)
		}
		if st.Async != "" {
			ch := make(chan cfReply, 1)
			run.pending[st.Async] = ch
			run.pendingConn[st.Async] = st.Conn
			sent := time.Now()
			go func() {
				v, err := run.issue(c, args, st.Typed)
				ch <- cfReply{v: v, err: err, sent: sent, at: time.Now()}
			}()
			return ""
		}
		end := time.Now().Add(msOf(st.UntilMs))
		for {
			v, err := run.issue(c, args, st.Typed)
			why := ""
			if err != nil {
				why = err.Error()
			} else {
				why = run.match(v, st.Expect)
			}
			if why == "" {
				return run.save(st.Save, v)
			}
			if st.UntilMs == "" || time.Now().After(end) {
				return why
			}
			time.Sleep(20 * time.Millisecond)
		}
	case "await":
		ch, ok := run.pending[st.ID]
		if !ok {
			return "no async command " + st.ID
		}
		select {
		case rep := <-ch:
			if isDropped(st.Expect) {
				// No reply: the server closed the connection under the command (CLIENT KILL).
				if rep.err == nil {
					return fmt.Sprintf("got %s, want the connection dropped", describe(rep.v))
				}
				if !errors.Is(rep.err, ErrConnectionLost) {
					return fmt.Sprintf("got error %v, want a lost connection", rep.err)
				}
				name := run.pendingConn[st.ID]
				if name == "" {
					name = "a"
				}
				if c, ok := run.conns[name]; ok {
					c.Close()
					delete(run.conns, name)
				}
				return ""
			}
			if rep.err != nil {
				return rep.err.Error()
			}
			if why := run.match(rep.v, st.Expect); why != "" {
				return why
			}
			if min := msOf(st.MinElapsedMs); rep.at.Sub(rep.sent) < min {
				return fmt.Sprintf("the reply came after %v, before %v", rep.at.Sub(rep.sent), min)
			}
			return run.save(st.Save, rep.v)
		case <-time.After(30 * time.Second):
			return "no reply within 30 s"
		}
	case "sleep":
		time.Sleep(msOf(st.Ms))
		return ""
	case "close":
		name := st.Conn
		if name == "" {
			name = "a"
		}
		if c, ok := run.conns[name]; ok {
			c.Close()
			delete(run.conns, name)
		}
		return ""
	case "acquire":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gc, err := Connect(ctx, Options{Addr: run.addr})
		if err != nil {
			return fmt.Sprintf("connect: %v", err)
		}
		g := &cfGuard{c: gc, ttl: msOf(st.TTLMs), lostAt: make(chan time.Time, 1)}
		run.guards[st.Guard] = g
		var opts []LockOption
		if st.MaxHoldMs != "" {
			opts = append(opts, WithMaxHold(msOf(st.MaxHoldMs)))
		}
		g.sent = time.Now()
		l, ok, err := gc.Acquire(ctx, run.subst(st.Key), g.ttl, opts...)
		if err != nil || !ok {
			return fmt.Sprintf("acquire: granted %v, error %v", ok, err)
		}
		g.l = l
		go func() { <-l.Done(); g.lostAt <- time.Now() }()
		run.saved[st.Save] = strconv.FormatInt(l.Token(), 10)
		return ""
	case "expect_held":
		g := run.guards[st.Guard]
		select {
		case <-g.l.Done():
			return fmt.Sprintf("the guard signalled loss: %v", g.l.Err())
		default:
			return ""
		}
	case "expect_lost":
		g := run.guards[st.Guard]
		select {
		case at := <-g.lostAt:
			g.lostAt <- at // keep it for later steps
			if st.BeforeDeadline && !at.Before(g.sent.Add(g.ttl)) {
				return fmt.Sprintf("loss signalled %v after sending, not before the TTL %v", at.Sub(g.sent), g.ttl)
			}
			return ""
		case <-time.After(msOf(st.WithinMs)):
			return fmt.Sprintf("no loss signal within %s ms", st.WithinMs)
		}
	case "release":
		g := run.guards[st.Guard]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, err := g.l.Release(ctx)
		if err != nil {
			return fmt.Sprintf("release raised: %v", err)
		}
		return run.match(boolInt(ok), st.Expect)
	case "sigstop", "sigcont":
		if run.srv == nil {
			return "no own server to signal"
		}
		if st.Do == "sigstop" {
			run.srv.signal(sigSTOP)
		} else {
			run.srv.signal(sigCONT)
		}
		return ""
	}
	return "unknown step " + st.Do
}

func isDropped(raw json.RawMessage) bool {
	var m struct{ Match string }
	_ = json.Unmarshal(raw, &m)
	return m.Match == "dropped"
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (run *cfRun) save(name string, v any) string {
	if name == "" {
		return ""
	}
	n, ok := v.(int64)
	if !ok {
		return fmt.Sprintf("cannot save %s: not an integer", describe(v))
	}
	run.saved[name] = strconv.FormatInt(n, 10)
	return ""
}

// issue sends a step's command: typed through the client's lock methods (results mapped back to the model:
// token -> integer, not acquired -> nil, bool -> 0/1, LockInfo -> lockInfoValue, server error -> *Error), or raw
// through the generic command API with the decoder's exact view.
func (run *cfRun) issue(c *Client, args []string, typed bool) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if !typed {
		raw := make([]any, len(args))
		for i, a := range args {
			raw[i] = a
		}
		return c.doExact(ctx, raw...)
	}
	num := func(i int) int64 { n, _ := strconv.ParseInt(args[i], 10, 64); return n }
	dur := func(i int) time.Duration { return time.Duration(num(i)) * time.Millisecond }
	var v any
	var err error
	grant := func(tok int64, ok bool, e error) {
		v, err = nil, e
		if ok {
			v = tok
		}
	}
	switch strings.ToUpper(args[0]) {
	case "LEASE":
		if len(args) == 5 {
			grant(c.LeaseWait(ctx, args[1], dur(2), dur(4)))
		} else {
			grant(c.Lease(ctx, args[1], dur(2)))
		}
	case "SEMAPHORE":
		if len(args) == 6 {
			grant(c.SemaphoreWait(ctx, args[1], int(num(2)), dur(3), dur(5)))
		} else {
			grant(c.Semaphore(ctx, args[1], int(num(2)), dur(3)))
		}
	case "RENEW":
		var ok bool
		ok, err = c.Renew(ctx, args[1], num(2), dur(3))
		v = boolInt(ok)
	case "RELEASE":
		var ok bool
		ok, err = c.Release(ctx, args[1], num(2))
		v = boolInt(ok)
	case "IFGT":
		var ok bool
		if len(args) == 6 {
			ok, err = c.IfGT(ctx, args[1], num(2), args[3], dur(5))
		} else {
			ok, err = c.IfGT(ctx, args[1], num(2), args[3], 0)
		}
		v = boolInt(ok)
	case "LOCKINFO":
		info, ok, e := c.LockInfo(ctx, args[1])
		err = e
		if ok {
			v = info
		}
	default:
		return nil, fmt.Errorf("no typed method for %s", args[0])
	}
	var se *Error
	if errors.As(err, &se) {
		return se, nil // matched like a reply
	}
	return v, err
}

// match checks a reply (exact raw view, or a typed result mapped back) against a matcher.
func (run *cfRun) match(v any, raw json.RawMessage) string {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Sprintf("bad matcher: %v", err)
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	asInt := func() (int64, bool) { n, ok := v.(int64); return n, ok }
	bad := fmt.Sprintf("got %s, want %s", describe(v), raw)
	switch str("match") {
	case "int":
		if n, ok := asInt(); ok && strconv.FormatInt(n, 10) == str("value") {
			return ""
		}
	case "int_between":
		lo, _ := strconv.ParseInt(str("min"), 10, 64)
		hi, _ := strconv.ParseInt(str("max"), 10, 64)
		if n, ok := asInt(); ok && n >= lo && n <= hi {
			return ""
		}
	case "nil":
		if v == nil {
			return ""
		}
	case "token":
		if n, ok := asInt(); ok && n > 0 {
			return ""
		}
	case "token_gt":
		than, _ := strconv.ParseInt(run.saved[str("than")], 10, 64)
		if n, ok := asInt(); ok && n > than {
			return ""
		}
	case "token_eq":
		if n, ok := asInt(); ok && strconv.FormatInt(n, 10) == run.saved[str("name")] {
			return ""
		}
	case "simple":
		if s, ok := v.(simpleString); ok && string(s) == str("value") {
			return ""
		}
	case "bulk":
		if s, ok := v.(string); ok && s == str("value") {
			return ""
		}
	case "error":
		if e, ok := v.(*Error); ok && e.Message == str("text") {
			return ""
		}
	case "value":
		want, _ := m["value"].(map[string]any)
		if why := modelMatch(v, want); why != "" {
			return why
		}
		return ""
	case "any":
		if _, isErr := v.(*Error); !isErr {
			return ""
		}
	case "lockinfo":
		if why := run.matchLockInfo(v, m); why != "" {
			return why + "; " + bad
		}
		return ""
	default:
		return "unknown matcher " + str("match")
	}
	return bad
}

func (run *cfRun) matchLockInfo(v any, m map[string]any) string {
	str := func(k string) string { s, _ := m[k].(string); return s }
	var info LockInfo
	switch x := v.(type) {
	case LockInfo:
		info = x
	default:
		// The raw reply: a map (RESP3) or a flat array (RESP2), fields in exactly this order.
		fields, why := lockInfoFields(v)
		if why != "" {
			return why
		}
		info = fields
	}
	if info.Kind != str("kind") || strconv.FormatInt(info.Limit, 10) != str("limit") || strconv.FormatInt(info.Waiters, 10) != str("waiters") {
		return fmt.Sprintf("kind/limit/waiters %s/%d/%d", info.Kind, info.Limit, info.Waiters)
	}
	hs, _ := m["holders"].([]any)
	if len(hs) != len(info.Holders) {
		return fmt.Sprintf("%d holders, want %d", len(info.Holders), len(hs))
	}
	for i, h := range hs {
		hm, _ := h.(map[string]any)
		tok, _ := hm["token"].(string)
		lo := msOf(fmt.Sprint(hm["remaining_ms_min"]))
		hi := msOf(fmt.Sprint(hm["remaining_ms_max"]))
		got := info.Holders[i]
		if strconv.FormatInt(got.Token, 10) != run.saved[tok] {
			return fmt.Sprintf("holder %d token %d, want %s=%s", i, got.Token, tok, run.saved[tok])
		}
		if got.Remaining < lo || got.Remaining > hi {
			return fmt.Sprintf("holder %d remaining %v not in [%v, %v]", i, got.Remaining, lo, hi)
		}
	}
	return ""
}

// lockInfoFields reads a raw LOCKINFO reply, insisting on the field order the corpus fixes.
func lockInfoFields(v any) (LockInfo, string) {
	var info LockInfo
	pairs := func(v any) ([][2]any, string) {
		switch x := v.(type) {
		case mapValue:
			return x, ""
		case []any:
			if len(x)%2 != 0 {
				return nil, "odd flat map"
			}
			out := make([][2]any, 0, len(x)/2)
			for i := 0; i < len(x); i += 2 {
				out = append(out, [2]any{x[i], x[i+1]})
			}
			return out, ""
		}
		return nil, fmt.Sprintf("not a map: %s", describe(v))
	}
	keyIs := func(k any, want string) bool {
		switch s := k.(type) {
		case string:
			return s == want
		case simpleString:
			return string(s) == want
		}
		return false
	}
	top, why := pairs(v)
	if why != "" {
		return info, why
	}
	if len(top) != 4 || !keyIs(top[0][0], "kind") || !keyIs(top[1][0], "limit") || !keyIs(top[2][0], "holders") || !keyIs(top[3][0], "waiters") {
		return info, "fields not kind, limit, holders, waiters in order"
	}
	kind, ok := top[0][1].(string)
	if !ok {
		return info, "kind is not a bulk string"
	}
	info.Kind = kind
	if info.Limit, ok = top[1][1].(int64); !ok {
		return info, "limit not an integer"
	}
	if info.Waiters, ok = top[3][1].(int64); !ok {
		return info, "waiters not an integer"
	}
	hs, ok := top[2][1].([]any)
	if !ok {
		return info, "holders not an array"
	}
	for _, h := range hs {
		hp, why := pairs(h)
		if why != "" {
			return info, why
		}
		if len(hp) != 2 || !keyIs(hp[0][0], "token") || !keyIs(hp[1][0], "remaining_ms") {
			return info, "holder fields not token, remaining_ms"
		}
		tok, ok1 := hp[0][1].(int64)
		rem, ok2 := hp[1][1].(int64)
		if !ok1 || !ok2 {
			return info, "holder values not integers"
		}
		info.Holders = append(info.Holders, LockHolder{Token: tok, Remaining: time.Duration(rem) * time.Millisecond})
	}
	return info, ""
}
