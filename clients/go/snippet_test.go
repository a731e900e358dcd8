package ruvio_test

// The Go snippets of the product post "A lock is not enough: fencing tokens with LEASE"
// (shared/product/fencing-tokens-with-lease.md), each copied verbatim into a function except for the address:
// the post connects to 127.0.0.1:6379, these to the test's server, "127.0.0.1:6379" replaced by addr. The
// tests around them check that each behaved as its comments say.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	ruvio "github.com/ruvio/ruvio/clients/go"
)

// leaseSnippet is the post's first Go snippet.
func leaseSnippet(ctx context.Context, addr string) error {
	// ---- verbatim, address aside ----
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: addr})
	if err != nil { return err }

	token, ok, err := c.Lease(ctx, "job:nightly-report", 30*time.Second)
	if err != nil { return err }
	if !ok { return nil } // someone else holds it
	// you hold it
	released, err := c.Release(ctx, "job:nightly-report", token)
	if err != nil { return err }
	fmt.Println(released) // true -> released (false if the token no longer matches)
	// ---- end of snippet ----
	return c.Close()
}

// semaphoreSnippet is the post's second Go snippet.
func semaphoreSnippet(ctx context.Context, addr string) error {
	// ---- verbatim, address aside ----
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: addr})
	if err != nil { return err }

	token, ok, err := c.Semaphore(ctx, "upstream:billing", 8, 15*time.Second)
	if err != nil { return err }
	if !ok { return nil } // all 8 slots are taken
	// a slot, token is 1700000000123
	if _, err := c.Release(ctx, "upstream:billing", token); err != nil { return err }
	// ---- end of snippet ----
	return c.Close()
}

// captureStdout runs f and returns what it printed.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		var buf [4096]byte
		var out []byte
		for {
			n, err := r.Read(buf[:])
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		done <- out
	}()
	ferr := f()
	os.Stdout = old
	w.Close()
	return string(<-done), ferr
}

func TestProductPostLeaseSnippet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := os.Getenv("RUVIO_ADDR") // the examples' server (TestMain)
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Del(ctx, "job:nightly-report")

	// Free lock: the snippet holds it, releases it and prints true.
	out, err := captureStdout(t, func() error { return leaseSnippet(ctx, addr) })
	if err != nil || out != "true\n" {
		t.Fatalf("snippet printed %q, error %v; want \"true\\n\"", out, err)
	}
	if _, held, _ := c.LockInfo(ctx, "job:nightly-report"); held {
		t.Fatal("the snippet did not release the lock")
	}

	// Someone else holds it: the snippet returns nil without printing.
	theirs, ok, err := c.Lease(ctx, "job:nightly-report", 30*time.Second)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	out, err = captureStdout(t, func() error { return leaseSnippet(ctx, addr) })
	if err != nil || out != "" {
		t.Fatalf("with the lock held elsewhere the snippet printed %q, error %v", out, err)
	}
	if info, _, _ := c.LockInfo(ctx, "job:nightly-report"); len(info.Holders) != 1 || info.Holders[0].Token != theirs {
		t.Fatalf("the other holder's lock was disturbed: %+v", info)
	}
	// "false if the token no longer matches".
	if released, err := c.Release(ctx, "job:nightly-report", theirs+1); err != nil || released {
		t.Fatalf("Release with a token that does not match = %v, %v", released, err)
	}
	if released, err := c.Release(ctx, "job:nightly-report", theirs); err != nil || !released {
		t.Fatalf("Release = %v, %v", released, err)
	}
}

func TestProductPostSemaphoreSnippet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := os.Getenv("RUVIO_ADDR")
	c, err := ruvio.Connect(ctx, ruvio.Options{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Del(ctx, "upstream:billing")

	if err := semaphoreSnippet(ctx, addr); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := c.LockInfo(ctx, "upstream:billing"); held {
		t.Fatal("the snippet did not release its slot (the key goes away with the last holder)")
	}
	// All 8 slots taken: the snippet returns nil and takes nothing.
	var tokens []int64
	for i := 0; i < 8; i++ {
		tok, ok, err := c.Semaphore(ctx, "upstream:billing", 8, 15*time.Second)
		if err != nil || !ok {
			t.Fatalf("slot %d: %v %v", i, ok, err)
		}
		if i > 0 && tok <= tokens[i-1] {
			t.Fatal("tokens must grow")
		}
		tokens = append(tokens, tok)
	}
	if err := semaphoreSnippet(ctx, addr); err != nil {
		t.Fatal(err)
	}
	if info, _, _ := c.LockInfo(ctx, "upstream:billing"); len(info.Holders) != 8 {
		t.Fatalf("%d holders, want the 8 others", len(info.Holders))
	}
	for _, tok := range tokens {
		if ok, err := c.Release(ctx, "upstream:billing", tok); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
}

// TestReadmeFirstExampleIsTheTestedSnippet: README.md's first example (its first go block other than the import
// line) is, byte for byte, the body of leaseSnippet above with the address the README names, so the example a
// reader copies is the code TestProductPostLeaseSnippet runs and `test.sh` builds untouched.
func TestReadmeFirstExampleIsTheTestedSnippet(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if !strings.HasPrefix(strings.TrimSpace(m[1]), "import ") {
			first = m[1]
			break
		}
	}
	src, err := os.ReadFile("snippet_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile("(?s)func leaseSnippet.*?// ---- verbatim, address aside ----\n(.*?)\t// ---- end of snippet ----").FindStringSubmatch(string(src))
	if body == nil {
		t.Fatal("leaseSnippet's verbatim markers not found")
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(body[1], "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	got := strings.Replace(first, `Addr: "127.0.0.1:6379"`, "Addr: addr", 1)
	if got != want.String() {
		t.Fatalf("README.md's first example differs from leaseSnippet:\n--- README\n%s\n--- leaseSnippet\n%s", got, want.String())
	}
}
