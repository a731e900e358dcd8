package ruvio

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests start real servers: ruvio from $RUVIO_BIN (required: the tests fail, not skip, without it), and
// Debian's redis-server / redis-sentinel for the Sentinel tests.

func ruvioBin(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("RUVIO_BIN")
	if bin == "" {
		tb.Fatal("RUVIO_BIN is not set: point it at the ruvio binary under test (the tests need a real server)")
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		tb.Fatalf("RUVIO_BIN=%s: not a file (%v)", bin, err)
	}
	return bin
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// proc is a server process on 127.0.0.1:port.
type proc struct {
	mu     sync.Mutex
	bin    string
	args   []string                // without --port
	mkArgs func(port int) []string // when set, the whole command line instead of --port port args...
	port   int
	dir    string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

func (p *proc) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *proc) start() error {
	if err := p.launch(); err != nil {
		return err
	}
	return waitPing(p.Addr(), p.exited, 15*time.Second)
}

// launch starts the process without waiting for it to answer.
func (p *proc) launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	args := append([]string{"--port", strconv.Itoa(p.port)}, p.args...)
	if p.mkArgs != nil {
		args = p.mkArgs(p.port)
	}
	cmd := exec.Command(p.bin, args...)
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	return nil
}

// waitPing waits until addr answers PING with PONG (or NOAUTH).
func waitPing(addr string, exited <-chan struct{}, limit time.Duration) error {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		select {
		case <-exited:
			return fmt.Errorf("server on %s exited during start-up", addr)
		default:
		}
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = nc.Write([]byte("PING\r\n"))
			line, rerr := bufio.NewReader(nc).ReadString('\n')
			nc.Close()
			// PONG, or NOAUTH from a server with a password; not LOADING (still reading its data).
			if rerr == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH")) {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("server on %s did not answer PING within %v", addr, limit)
}

func (p *proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-exited
}

// stop ends the process with SIGTERM and waits (SIGKILL after 10 s).
func (p *proc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

func (p *proc) signal(s syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.cmd.Process.Signal(s)
}

// startProc starts bin with args on a free port (retrying a few ports: another process may take one first).
func startProc(bin string, dir string, args ...string) (*proc, error) {
	return startProcWith(bin, dir, nil, args...)
}

func startProcWith(bin string, dir string, mkArgs func(port int) []string, args ...string) (*proc, error) {
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p := &proc{bin: bin, args: args, mkArgs: mkArgs, port: port, dir: dir, log: filepath.Join(dir, fmt.Sprintf("server-%d.log", port))}
		if last = p.start(); last == nil {
			return p, nil
		}
		p.kill()
		logText, _ := os.ReadFile(p.log)
		last = fmt.Errorf("%v; log:\n%s", last, logText)
	}
	return nil, last
}

// server is a ruvio process owned by one test.
type server struct {
	*proc
	t testing.TB
}

func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	bin := ruvioBin(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	p, err := startProc(bin, dir, append([]string{"--dir", data}, args...)...)
	if err != nil {
		t.Fatalf("starting ruvio: %v", err)
	}
	t.Cleanup(p.kill)
	return &server{proc: p, t: t}
}

// restart stops the server (SIGTERM, so it flushes its log) and starts it again on the same port with the same
// data folder.
func (s *server) restart() {
	s.t.Helper()
	s.stop()
	var err error
	for i := 0; i < 50; i++ { // the port may linger for a moment
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("restarting ruvio: %v", err)
}

// pause stops the process (SIGSTOP) and waits until the kernel shows it stopped.
func (s *server) pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	stat := fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)
	for i := 0; i < 500; i++ {
		b, err := os.ReadFile(stat)
		if err != nil {
			s.t.Fatalf("reading %s: %v", stat, err)
		}
		// "pid (comm) S ...": the state follows the last ')'.
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && (f[0] == "T" || f[0] == "t") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatal("the server did not stop after SIGSTOP")
}
func (s *server) resume() { s.signal(syscall.SIGCONT) }
