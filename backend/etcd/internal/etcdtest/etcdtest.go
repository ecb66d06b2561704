// Package etcdtest starts real etcd clusters for the tests: members of the
// etcd binary installed on this machine (.ci/ensure-etcd), on free loopback
// ports, with data directories that the test removes. Every process is
// killed when its test ends, whatever happened in between.
package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Timing of the test clusters. The election timeout makes etcd's shortest
// lease 1s (ceil(1.5 × 500ms)); it is long enough not to trigger elections on
// a loaded machine, short enough that a killed leader is replaced quickly.
const (
	HeartbeatMillis = 100
	ElectionMillis  = 500
	// MinTTL is the shortest lease the test clusters grant.
	MinTTL = time.Second
)

// Binary returns the path of the etcd server. When there is none, the test
// is skipped, or fails when LEASEHOLD_REQUIRE_SERVICES=1 (make test).
func Binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd"
	}
	msg := "no etcd server binary on PATH or at /usr/bin/etcd; run .ci/ensure-etcd (as root it installs Debian's etcd-server)"
	if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Cluster is a running etcd cluster of this test.
type Cluster struct {
	t       testing.TB
	bin     string
	Members []*Member
}

// Member is one etcd process of a Cluster.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	dir       string
	args      []string
	log       *lockedBuffer
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	stopped   bool // SIGSTOPped
}

// Start starts a cluster of n members and waits until it has a leader. It is
// stopped (every process killed, data removed) when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: Binary(t)}
	base := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		// fsync on tmpfs is free: elections then do not depend on the disk.
		sweepShm()
		if d, err := os.MkdirTemp("/dev/shm", fmt.Sprintf("leasehold-etcd-%d-", os.Getpid())); err == nil {
			base = d
			t.Cleanup(func() { _ = os.RemoveAll(d) })
		}
	}
	ports := freePorts(t, 2*n)
	var initial []string
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			dir:       filepath.Join(base, fmt.Sprintf("m%d", i)),
			log:       &lockedBuffer{},
		}
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	token := fmt.Sprintf("lh-%d", time.Now().UnixNano())
	for _, m := range c.Members {
		m.args = []string{
			"--name", m.Name, "--data-dir", m.dir,
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--heartbeat-interval", fmt.Sprint(HeartbeatMillis), "--election-timeout", fmt.Sprint(ElectionMillis),
			"--pre-vote", "--log-level", "warn",
		}
	}
	t.Cleanup(c.stop)
	for _, m := range c.Members {
		c.start(m)
	}
	c.WaitHealthy()
	return c
}

func (c *Cluster) start(m *Member) {
	c.t.Helper()
	cmd := exec.Command(c.bin, m.args...)
	cmd.Stdout, cmd.Stderr = m.log, m.log
	// Its own process group, and killed with the test binary if that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting etcd %s: %v", m.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	m.mu.Lock()
	m.cmd, m.exited, m.stopped = cmd, exited, false
	m.mu.Unlock()
}

// stop kills every member; on failure it logs their output first.
func (c *Cluster) stop() {
	for _, m := range c.Members {
		m.Kill()
	}
	if c.t.Failed() {
		for _, m := range c.Members {
			c.t.Logf("etcd %s output (tail):\n%s", m.Name, m.log.tail(4000))
		}
	}
}

// Endpoints are the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client returns a client of the given endpoints (every member's when none),
// closed when the test ends.
func (c *Cluster) Client(endpoints ...string) *clientv3.Client {
	c.t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		// Quiet: the tests kill members on purpose.
		Logger: zap.NewNop(),
		// Find out quickly that a member is gone (killed, stopped) so that
		// calls move to another one.
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
	})
	if err != nil {
		c.t.Fatalf("etcd client: %v", err)
	}
	c.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// WaitHealthy waits until every running member answers and agrees on a
// leader.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.healthy()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("etcd cluster not healthy after 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) healthy() error {
	var leader uint64
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		st, err := m.status()
		if err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
			return fmt.Errorf("%s: leader %x (others: %x)", m.Name, st.Leader, leader)
		}
		leader = st.Leader
	}
	return nil
}

func (m *Member) status() (*clientv3.StatusResponse, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return cli.Status(ctx, m.ClientURL)
}

// Leader returns the member that leads now (after WaitHealthy).
func (c *Cluster) Leader() *Member {
	c.t.Helper()
	c.WaitHealthy()
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		st, err := m.status()
		if err != nil {
			c.t.Fatalf("status of %s: %v", m.Name, err)
		}
		if st.Header.MemberId == st.Leader {
			return m
		}
	}
	c.t.Fatal("no member leads")
	return nil
}

// Running reports whether m's process is alive (stopped counts as alive).
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return !m.stopped
	}
}

// Kill kills m (SIGKILL: no clean shutdown) and waits for it to exit. Its
// data stays for Restart.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// Pause stops m with SIGSTOP: it keeps its sockets but answers nothing, to
// its clients and its peers alike, as a member behind a partition does.
func (m *Member) Pause() {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGSTOP)
	m.stopped = true
}

// Resume continues a paused member.
func (m *Member) Resume() {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGCONT)
	m.stopped = false
}

// ID is m's member ID, as its cluster knows it.
func (m *Member) ID() uint64 {
	st, err := m.status()
	if err != nil {
		return 0
	}
	return st.Header.MemberId
}

// WipeData removes a killed member's data directory: it has lost its disk.
func (m *Member) WipeData() error { return os.RemoveAll(m.dir) }

// Restart starts a killed member again on its data and ports.
func (c *Cluster) Restart(m *Member) {
	c.t.Helper()
	args := make([]string, len(m.args))
	copy(args, m.args)
	for i := range args {
		if args[i] == "new" {
			args[i] = "existing" // ignored with a data dir, but honest
		}
	}
	m.args = args
	c.start(m)
}

// sweepShm removes the data directories that test processes which no longer
// run left in /dev/shm (killed before their cleanup ran; their etcd members
// died with them, by Pdeathsig).
func sweepShm() {
	dirs, _ := filepath.Glob("/dev/shm/leasehold-etcd-*")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), "leasehold-etcd-%d-", &pid); err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(d)
		}
	}
}

// freePorts returns n distinct free TCP ports on loopback. They are free
// when asked; etcd binds them a moment later.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// lockedBuffer collects a member's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
