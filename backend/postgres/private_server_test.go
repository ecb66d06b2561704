package postgres

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// privateServer is a PostgreSQL cluster of this test alone (own data
// directory, own port), so that it can be stopped and restarted without
// disturbing anybody else's use of the machine's shared server.
type privateServer struct {
	bin, dir string
	port     int
	asUser   []string // prefix that runs a command as the postgres OS user
	settings []string // extra server settings, "name=value", at every start
}

// startPrivateServer initdb's and starts a throwaway cluster, with the given
// settings ("name=value") on top of the defaults below. It skips the test
// when the server binaries are not installed or we can run them neither as
// root (switching to user postgres) nor as postgres.
func startPrivateServer(t *testing.T, settings ...string) *privateServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("no PostgreSQL server binaries under /usr/lib/postgresql: cannot run a private server to restart")
	}
	sort.Strings(bins)
	s := &privateServer{bin: filepath.Dir(bins[len(bins)-1]), settings: settings}
	me, err := user.Current()
	if err != nil {
		t.Skipf("cannot tell who we are: %v", err)
	}
	var pg *user.User
	switch me.Username {
	case "postgres":
		pg = me
	case "root":
		if pg, err = user.Lookup("postgres"); err != nil {
			t.Skip("no postgres OS user to run a private server as")
		}
		s.asUser = []string{"runuser", "-u", "postgres", "--"}
	default:
		t.Skip("a private PostgreSQL server needs root or user postgres")
	}
	s.dir, err = os.MkdirTemp("", "leasehold-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(s.dir) })
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := os.Chown(s.dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	s.port = freePort(t)
	s.run(t, "initdb", "-D", s.dir+"/data", "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
	s.start(t)
	t.Cleanup(func() { s.stop(t, "immediate") })
	return s
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *privateServer) run(t *testing.T, tool string, args ...string) {
	t.Helper()
	argv := append(append(append([]string{}, s.asUser...), filepath.Join(s.bin, tool)), args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, out)
	}
}

func (s *privateServer) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// start starts the server and waits until it accepts connections.
func (s *privateServer) start(t *testing.T) {
	t.Helper()
	// fsync=off: a crash here is of the server processes, not of the
	// machine, so what reached the kernel survives; what was still in the
	// server's own memory (WAL buffers) does not.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50", s.port, s.dir)
	for _, kv := range s.settings {
		opts += " -c " + kv
	}
	s.run(t, "pg_ctl", "-D", s.dir+"/data", "-o", opts, "-l", s.dir+"/log", "-w", "-t", "60", "start")
}

// stop stops the server; mode "immediate" is a crash (recovery from WAL at
// the next start), "fast" a clean shutdown.
func (s *privateServer) stop(t *testing.T, mode string) {
	t.Helper()
	argv := append(append(append([]string{}, s.asUser...), filepath.Join(s.bin, "pg_ctl")), "-D", s.dir+"/data", "-m", mode, "-w", "stop")
	_ = exec.Command(argv[0], argv[1:]...).Run() // already stopped is fine
}
