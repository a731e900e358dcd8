package ruvio

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

const (
	sigSTOP = syscall.SIGSTOP
	sigCONT = syscall.SIGCONT
)

// conformanceAddr is the RUVIO_ADDR the process was started with (the conformance script's shared server),
// read before TestMain points RUVIO_ADDR at the examples' server.
var conformanceAddr string

// TestMain starts one ruvio for the package examples (which read its address from RUVIO_ADDR, as a user's
// program would read its configuration) and stops it at the end.
func TestMain(m *testing.M) {
	conformanceAddr = os.Getenv("RUVIO_ADDR")
	bin := os.Getenv("RUVIO_BIN")
	if bin == "" {
		fmt.Fprintln(os.Stderr, "RUVIO_BIN is not set: the tests need a real ruvio binary (set RUVIO_BIN=/path/to/ruvio)")
		os.Exit(2)
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		fmt.Fprintf(os.Stderr, "RUVIO_BIN=%s is not a file: %v\n", bin, err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "ruvio-go-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	srv, err := startProc(bin, dir, "--dir", filepath.Join(dir, "data"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the examples' ruvio:", err)
		os.Exit(2)
	}
	os.Setenv("RUVIO_ADDR", srv.Addr())
	code := m.Run()
	srv.kill()
	os.RemoveAll(dir)
	os.Exit(code)
}
