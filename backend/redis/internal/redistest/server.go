package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long a redis-server may take to say it is ready.
const startTimeout = 10 * time.Second

// Server is a redis-server process owned by one test, listening on a free
// loopback port, with no automatic persistence (no save points, no AOF): only
// an explicit SAVE writes a snapshot, to the server's own directory. It is
// stopped in t.Cleanup.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	// conf is the path of a config file given before the arguments ("" for
	// none), and
	// ready the log line that says the process accepts connections.
	conf  string
	ready string

	mu  sync.Mutex
	cmd *exec.Cmd
	// done is closed when cmd has exited and its output was drained.
	done chan struct{}
}

// Start starts a redis-server with extra command-line arguments (e.g.
// "--replicaof", "127.0.0.1", "6380"). It skips the test when redis-server is
// not installed, unless LEASEHOLD_REQUIRE_SERVICES=1, in which case it fails.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server is not installed: %v", err)
	}
	return startServer(t, bin, t.TempDir(), "", "Ready to accept connections", extra)
}

// startServer starts redis-server in dir with an optional config file (a
// path, "" for none) and extra arguments, and waits for the log line ready.
// Its Kill is registered with t.Cleanup before anything can fail, so no
// process outlives its test.
func startServer(t testing.TB, bin, dir, conf, ready string, extra []string) *Server {
	t.Helper()
	s := &Server{t: t, bin: bin, dir: dir, port: FreePort(t), args: extra, conf: conf, ready: ready}
	t.Cleanup(s.Kill)
	s.start()
	return s
}

// Dir is the server's working directory (snapshots, nodes.conf, a sentinel's
// config file).
func (s *Server) Dir() string { return s.dir }

// Alive reports whether the process runs (it was not killed).
func (s *Server) Alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// Kill stops the server at once (SIGKILL), losing every key. It is idempotent.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart kills the server and starts a new one on the same port and with the
// same arguments. Without a SAVE before, it comes back empty, as after a crash
// without persistence; after a SAVE it loads that snapshot, as after a crash
// that lost every write since (an older RDB, the unsynced tail of an AOF).
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

func (s *Server) start() {
	s.t.Helper()
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
		"--loglevel", "notice",
	)
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	dieWithTest(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatalf("redis-server pipe: %v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	var logTail strings.Builder
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if !signalled {
				logTail.WriteString(line + "\n")
				if strings.Contains(line, s.ready) {
					signalled = true
					close(ready)
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	select {
	case <-ready:
	case <-done:
		s.t.Fatalf("redis-server on port %d exited before it was ready:\n%s", s.port, logTail.String())
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		<-done
		s.t.Fatalf("redis-server on port %d was not ready within %v", s.port, startTimeout)
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Unavailable skips the test because a service is missing, or fails it when
// LEASEHOLD_REQUIRE_SERVICES=1 says every service must be there.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if RequireServices() {
		t.Fatalf("%s (LEASEHOLD_REQUIRE_SERVICES=1)", msg)
	}
	t.Skipf("%s; set LEASEHOLD_REQUIRE_SERVICES=1 to fail instead of skipping", msg)
}
