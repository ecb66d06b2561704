package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/poll"
)

const longTTL = time.Minute // long enough never to end while a test looks

// TestListAndInspect: list and inspect show a lease held by a real Manager,
// as a table and as JSON; a free name is "free" (exit 0) or {"held":false}.
func TestListAndInspect(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *storeEnv) {
		ctx := context.Background()
		m := newManager(t, e, "cli-owner-"+randomHex(3))
		prefix := "jobs-" + randomHex(4) + "/"
		name := prefix + "invoice-run"
		l, err := m.Acquire(ctx, name, leasehold.WithTTL(longTTL), leasehold.WithMetadata("host=a\tpid=1"))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		second, err := m.Acquire(ctx, prefix+"a-second", leasehold.WithTTL(longTTL)) // listed first
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		other, err := m.Acquire(ctx, "elsewhere-"+randomHex(4), leasehold.WithTTL(longTTL))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		tok := strconv.FormatUint(l.Token(), 10)

		r := run(t, "", nil, e.args("list", "-prefix", prefix)...)
		lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
		if r.code != 0 || len(lines) != 3 {
			t.Fatalf("list: exit %d, want 0 and a header and two rows", r.code)
		}
		if f := strings.Fields(lines[1]); f[0] != second.Name() {
			t.Errorf("list: first row %q, want %s first (name order)", lines[1], second.Name())
		}
		if f := strings.Fields(lines[0]); strings.Join(f, " ") != "NAME OWNER TOKEN TIME LEFT METADATA" {
			t.Errorf("list header %q", lines[0])
		}
		f := strings.Fields(lines[2])
		if len(f) != 5 || f[0] != name || f[1] != m.Owner() || f[2] != tok || f[4] != `host=a\tpid=1` {
			t.Errorf("list row %q: want %s %s %s ... host=a\\tpid=1 (the tab escaped)", lines[2], name, m.Owner(), tok)
		}
		if d, err := time.ParseDuration(f[3]); err != nil || d <= 0 || d > longTTL {
			t.Errorf("time left %q: want a duration in (0, %v]", f[3], longTTL)
		}
		if strings.Contains(r.stdout, other.Name()) {
			t.Errorf("list -prefix %s shows %s", prefix, other.Name())
		}

		r = run(t, "", nil, e.args("list", "-json", "-prefix", prefix)...)
		var hs []holdingJSON
		if err := json.Unmarshal([]byte(r.stdout), &hs); err != nil || r.code != 0 || len(hs) != 2 {
			t.Fatalf("list -json: exit %d, %v, %d holdings", r.code, err, len(hs))
		}
		checkHolding(t, hs[0], second, "")
		checkHolding(t, hs[1], l, "host=a\tpid=1")

		r = run(t, "", nil, e.args("inspect", name)...)
		r.stdout = squeeze(r.stdout)
		for _, want := range []string{"name: " + name, "owner: " + m.Owner(), "token: " + tok, `metadata: host=a\tpid=1`, "time left:"} {
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("inspect: exit %d, want 0 and %q", r.code, want)
			}
		}
		r = run(t, "", nil, e.args("inspect", "-json", name)...)
		var h holdingJSON
		if err := json.Unmarshal([]byte(r.stdout), &h); err != nil || r.code != 0 {
			t.Fatalf("inspect -json: exit %d, %v", r.code, err)
		}
		checkHolding(t, h, l, "host=a\tpid=1")

		// -key-prefix mirrors a Manager's WithKeyPrefix: names without it.
		r = run(t, "", nil, e.args("inspect", "-key-prefix", prefix, "invoice-run")...)
		r.stdout = squeeze(r.stdout)
		if r.code != 0 || !strings.Contains(r.stdout, "name: invoice-run") || !strings.Contains(r.stdout, "key: "+name) {
			t.Errorf("inspect -key-prefix: exit %d, want the name and the key", r.code)
		}

		free := prefix + "free"
		if r = run(t, "", nil, e.args("inspect", free)...); r.code != 0 || r.stdout != "free\n" {
			t.Errorf("inspect of a free name: exit %d, stdout %q; want 0 and \"free\"", r.code, r.stdout)
		}
		if r = run(t, "", nil, e.args("inspect", "-json", free)...); r.code != 0 || !strings.HasPrefix(r.stdout, "{\"held\":false,\"name\":") {
			t.Errorf("inspect -json of a free name: exit %d, stdout %q", r.code, r.stdout)
		}
		if r = run(t, "", nil, e.args("list", "-json", "-prefix", free)...); r.code != 0 || r.stdout != "[]\n" {
			t.Errorf("list -json of nothing: exit %d, stdout %q; want []", r.code, r.stdout)
		}
	})
}

// squeeze collapses the alignment spaces of a detail view.
func squeeze(s string) string {
	return regexp.MustCompile(` +`).ReplaceAllString(s, " ")
}

func checkHolding(t *testing.T, h holdingJSON, l *leasehold.Lease, meta string) {
	t.Helper()
	if !h.Held || h.Name != l.Name() || h.Key != l.Name() || h.Owner != l.Owner() || h.Token != l.Token() || h.Metadata != meta {
		t.Errorf("holding %+v: want %s held by %s with token %d and metadata %q", h, l.Name(), l.Owner(), l.Token(), meta)
	}
	if h.ExpiresInMS <= 0 || h.ExpiresInMS > longTTL.Milliseconds() || h.ExpiresAt.IsZero() {
		t.Errorf("holding %+v: want 0 < expires_in_ms <= %d and an expires_at", h, longTTL.Milliseconds())
	}
}

// TestReleaseForce: release -force asks first and releases nothing unless
// stdin says "y"; with "y" or -yes it removes the holding, the holder learns
// of the loss with ReasonRejected at its next renewal, and the next grant's
// token is higher.
func TestReleaseForce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *storeEnv) {
		ctx := context.Background()
		m := newManager(t, e, "cli-holder-"+randomHex(3))
		sub := m.Subscribe(16)
		defer sub.Close()
		name := "release-" + randomHex(4)
		// A short renew period: the holder hears of the revoke within it.
		l, err := m.Acquire(ctx, name, leasehold.WithTTL(longTTL), leasehold.WithRenewEvery(100*time.Millisecond))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		for _, stdin := range []string{"n\n", "", "yes please\n"} {
			r := run(t, stdin, nil, e.args("release", "-force", name)...)
			if r.code != 1 || !strings.Contains(r.stderr, "not confirmed: nothing released") || !strings.Contains(r.stderr, "[y/N]") {
				t.Errorf("release with stdin %q: exit %d, want 1 and a refusal after the question", stdin, r.code)
			}
			if !strings.Contains(r.stderr, "token "+strconv.FormatUint(l.Token(), 10)) {
				t.Errorf("the question does not show the holding's token %d", l.Token())
			}
		}
		if h, held, err := e.b.Inspect(ctx, name); err != nil || !held || h.Token != l.Token() {
			t.Fatalf("after refusals: %+v held=%v err=%v; want still held with token %d", h, held, err, l.Token())
		}
		if err := l.Err(); err != nil {
			t.Fatalf("the lease ended after refusals: %v", err)
		}

		interruptPrompt(t, e, name)
		if err := l.Err(); err != nil {
			t.Fatalf("the lease ended after an interrupted prompt: %v", err)
		}

		r := run(t, "", nil, e.args("release", "-force", "-yes", name)...)
		want := "released " + name + ": owner " + m.Owner() + ", token " + strconv.FormatUint(l.Token(), 10)
		if r.code != 0 || !strings.HasPrefix(r.stdout, want) {
			t.Fatalf("release -force -yes: exit %d, stdout %q; want 0 and %q", r.code, r.stdout, want)
		}
		waitLost(t, sub, l)

		// The name is free: release again releases nothing, exit 0, with
		// -token too.
		if r = run(t, "", nil, e.args("release", "-force", "-yes", name)...); r.code != 0 || !strings.Contains(r.stderr, "is free: nothing released") {
			t.Errorf("release of a free name: exit %d, want 0 and \"is free\"", r.code)
		}
		if r = run(t, "", nil, e.args("release", "-force", "-yes", "-token", strconv.FormatUint(l.Token(), 10), name)...); r.code != 0 || !strings.Contains(r.stderr, "is free: nothing released") {
			t.Errorf("release -token of a free name: exit %d, want 0 and \"is free\"", r.code)
		}

		m2 := newManager(t, e, "cli-next-"+randomHex(3))
		sub2 := m2.Subscribe(16)
		defer sub2.Close()
		l2, err := m2.Acquire(ctx, name, leasehold.WithTTL(longTTL), leasehold.WithRenewEvery(100*time.Millisecond))
		if err != nil {
			t.Fatalf("Acquire after the release: %v", err)
		}
		if l2.Token() <= l.Token() {
			t.Fatalf("token after the forced release %d, want above %d", l2.Token(), l.Token())
		}

		// -token names another holding: nothing is released, exit 1.
		r = run(t, "", nil, e.args("release", "-force", "-yes", "-token", strconv.FormatUint(l.Token(), 10), name)...)
		if r.code != 1 || !strings.Contains(r.stderr, "nothing released") || l2.Err() != nil {
			t.Errorf("release -token of an old holding: exit %d, lease err %v; want 1 and the lease kept", r.code, l2.Err())
		}

		// Confirmed on stdin, with JSON output.
		r = run(t, "y\n", nil, e.args("release", "-force", "-json", name)...)
		var out struct {
			Released bool        `json:"released"`
			Holding  holdingJSON `json:"holding"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || !out.Released || out.Holding.Token != l2.Token() {
			t.Fatalf("release -json confirmed with y: exit %d, %+v, %v", r.code, out, err)
		}
		waitLost(t, sub2, l2)
	})
}

// interruptPrompt sends SIGINT to release while it waits for an answer:
// it must exit 1 and release nothing.
func interruptPrompt(t *testing.T, e *storeEnv, name string) {
	t.Helper()
	stderr := newLineSink()
	cmd := exec.Command(bin, e.args("release", "-force", name)...)
	cmd.Env, cmd.Stderr = childEnv(nil), stderr
	stdin, err := cmd.StdinPipe() // never written: nobody answers
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start release: %v", err)
	}
	stderr.waitFor(t, "the question", func(l string) bool { return strings.HasSuffix(l, "[y/N] ") })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("SIGINT: %v", err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("release interrupted at the prompt: %v, want exit 1", err)
	}
	if out := strings.Join(stderr.all(), "\n"); !strings.Contains(out, "interrupted: nothing released") {
		t.Errorf("release interrupted at the prompt said:\n%s", out)
	}
}

// waitLost waits for l's loss event, which must say ReasonRejected.
func waitLost(t *testing.T, sub *leasehold.Subscription, l *leasehold.Lease) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		select {
		case ev := <-sub.Events():
			if ev.Name != l.Name() || ev.Token != l.Token() {
				continue
			}
			if ev.Reason != leasehold.ReasonRejected || !errors.Is(l.Err(), leasehold.ErrLost) {
				t.Fatalf("loss %+v, lease err %v: want ReasonRejected and ErrLost", ev, l.Err())
			}
			return
		case <-deadline.C:
			t.Fatalf("no loss event for %s token %d within a minute (lease err %v)", l.Name(), l.Token(), l.Err())
		}
	}
}

// TestWatch: watch streams a grant and a release made while it runs (JSON
// lines), and stops with exit 0 on SIGINT. The test waits for each line
// rather than for a while: machine load cannot change its outcome.
func TestWatch(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *storeEnv) {
		ctx := context.Background()
		m := newManager(t, e, "cli-watched-"+randomHex(3))
		prefix := "watch-" + randomHex(4) + "/"
		before, err := m.Acquire(ctx, prefix+"before", leasehold.WithTTL(longTTL))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		stdout, stderr := newLineSink(), newLineSink()
		cmd := exec.Command(bin, e.args("watch", "-json", "-prefix", prefix, "-interval", "200ms", "-for", "5m")...)
		cmd.Env, cmd.Stdout, cmd.Stderr = childEnv(nil), stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start watch: %v", err)
		}
		waited := false
		defer func() {
			if !waited {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}()
		stderr.waitFor(t, "watching", func(l string) bool { return strings.Contains(l, "leasehold watch: watching") })
		event := func(ev string, l *leasehold.Lease) func(string) bool {
			return func(line string) bool {
				var e eventJSON
				return json.Unmarshal([]byte(line), &e) == nil && e.Event == ev && e.Name == l.Name() && e.Token == l.Token() && e.Owner == l.Owner()
			}
		}
		stdout.waitFor(t, "held "+before.Name(), event(evHeld, before))

		l, err := m.Acquire(ctx, prefix+"job", leasehold.WithTTL(longTTL))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		stdout.waitFor(t, "granted "+l.Name(), event(evGranted, l))
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		stdout.waitFor(t, "released "+l.Name(), event(evReleased, l))

		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatalf("SIGINT: %v", err)
		}
		err = cmd.Wait()
		waited = true
		if err != nil {
			t.Fatalf("watch after SIGINT: %v (want exit 0)\nstderr:\n%s", err, strings.Join(stderr.all(), "\n"))
		}
		for _, line := range stdout.all() {
			var ev eventJSON
			if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Time.IsZero() || !strings.HasPrefix(ev.Name, prefix) {
				t.Errorf("watch line %q: not an event under %s (%v)", line, prefix, err)
			}
			if ev.Event == evExpired || (ev.Name == before.Name() && ev.Event != evHeld) {
				t.Errorf("watch line %q: nothing expired, and %s did not change", line, before.Name())
			}
		}
	})
}

// TestWatchWakesOnRelease: watch reports a release at once from the store's
// notification, not at its next look (an hour away). The test waits until
// the watch's subscription is in the store (so that the release cannot come
// before it), and uses the backend directly: no Manager subscribes.
func TestWatchWakesOnRelease(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *storeEnv) {
		if e.listeners == nil {
			t.Skipf("%s: no count of the watch's subscription to wait for (SQL Server and MySQL have no notifications; etcd's watchers are not counted here)", e.name)
		}
		ctx := context.Background()
		key := "wake-" + randomHex(4)
		req := backend.AcquireRequest{Key: key, Owner: "cli-direct", Attempt: "attempt-" + randomHex(8), TTL: longTTL}
		g, err := e.b.Acquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		stdout, stderr := newLineSink(), newLineSink()
		cmd := exec.Command(bin, e.args("watch", "-json", "-prefix", key, "-interval", "1h", "-for", "5m")...)
		cmd.Env, cmd.Stdout, cmd.Stderr = childEnv(nil), stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start watch: %v", err)
		}
		defer func() {
			_ = cmd.Process.Signal(os.Interrupt)
			if err := cmd.Wait(); err != nil {
				t.Errorf("watch after SIGINT: %v (want exit 0)", err)
			}
		}()
		isEvent := func(ev string) func(string) bool {
			return func(line string) bool {
				var e eventJSON
				return json.Unmarshal([]byte(line), &e) == nil && e.Event == ev && e.Key == key && e.Token == g.Token
			}
		}
		stdout.waitFor(t, "held "+key, isEvent(evHeld))
		poll.Until(t, "the watch subscribed to release notifications", time.Minute, func() bool {
			n, err := e.listeners(ctx)
			if err != nil {
				t.Fatalf("count the store's listeners: %v", err)
			}
			return n > 0
		})
		// Stores announce only releases someone waits for: a contender
		// that will wait is refused first.
		w, err := e.b.Acquire(ctx, backend.AcquireRequest{Key: key, Owner: "cli-waiter", Attempt: "attempt-" + randomHex(8), TTL: longTTL, Wait: true})
		if err != nil || w.Acquired {
			t.Fatalf("waiting Acquire while held: %+v, %v; want a refusal", w, err)
		}
		if err := e.b.Release(ctx, backend.ReleaseRequest{Key: key, Owner: req.Owner, Attempt: req.Attempt, Token: g.Token}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		stdout.waitFor(t, "released "+key, isEvent(evReleased))
	})
}

// TestWatchFor: watch -for ends by itself with exit 0, and its text lines
// carry time, event, name, owner and token.
func TestWatchFor(t *testing.T) {
	t.Parallel()
	e := postgresEnv(t)
	m := newManager(t, e, "cli-for-"+randomHex(3))
	l, err := m.Acquire(context.Background(), "for-"+randomHex(4), leasehold.WithTTL(longTTL))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	r := run(t, "", nil, e.args("watch", "-prefix", l.Name(), "-for", "1s")...)
	f := strings.Fields(r.stdout)
	if r.code != 0 || len(f) != 5 || f[1] != evHeld || f[2] != l.Name() || f[3] != "owner="+l.Owner() || f[4] != "token="+strconv.FormatUint(l.Token(), 10) {
		t.Fatalf("watch -for 1s: exit %d, stdout %q; want 0 and one held line", r.code, r.stdout)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", f[0]); err != nil {
		t.Errorf("event time %q: %v", f[0], err)
	}
}

// TestStoreFromEnvironment: with no store flag, the one LEASEHOLD_* variable
// set selects the store.
func TestStoreFromEnvironment(t *testing.T) {
	t.Parallel()
	e := postgresEnv(t)
	r := run(t, "", []string{envPostgres + "=" + postgresDSN()}, "list", "-schema", e.flags[3])
	if r.code != 0 || !strings.HasPrefix(r.stdout, "NAME") {
		t.Fatalf("list with %s: exit %d", envPostgres, r.code)
	}
}

// countingListener stands where a store would be and tells whether the
// binary connected to it.
type countingListener struct{ net.Listener }

func newCountingListener(t *testing.T) *countingListener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return &countingListener{l}
}

func (c *countingListener) port() string {
	return strconv.Itoa(c.Addr().(*net.TCPAddr).Port)
}

// connected reports whether anything connected so far. A connection made by
// a process that has exited is already in the accept queue: the kernel
// completes the handshake before connect returns.
func (c *countingListener) connected(t *testing.T) bool {
	t.Helper()
	_ = c.Listener.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond))
	conn, err := c.Accept()
	if err == nil {
		conn.Close()
		return true
	}
	return false
}

// TestUsageErrors: bad command lines exit 2 with a message naming the
// problem, before any connection, and never print the password.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	l := newCountingListener(t)
	const secret = "s3cretPW"
	pg := "postgres://admin:" + secret + "@127.0.0.1:" + l.port() + "/db"
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no command", nil, nil, "no command"},
		{"unknown command", nil, []string{"lsit", "-postgres", pg}, `unknown command "lsit"`},
		{"no store", nil, []string{"list"}, "no store: give -redis ADDR, -postgres DSN, -sqlserver DSN, -mysql DSN or -etcd ENDPOINTS"},
		{"two stores", nil, []string{"list", "-redis", "127.0.0.1:" + l.port(), "-postgres", pg}, "give one store, not -redis and -postgres"},
		{"two store variables", []string{envPostgres + "=" + pg, envRedis + "=127.0.0.1:" + l.port()}, []string{"list"}, "several store variables are set"},
		{"missing NAME", nil, []string{"inspect", "-postgres", pg}, "missing NAME"},
		{"two NAMEs", nil, []string{"inspect", "-postgres", pg, "a", "b"}, "one NAME only"},
		{"blank NAME", nil, []string{"inspect", "-postgres", pg, " "}, "bad NAME"},
		{"NAME to list", nil, []string{"list", "-postgres", pg, "a"}, `unexpected argument "a"`},
		{"release without -force", nil, []string{"release", "-postgres", pg, "a"}, "release needs -force"},
		{"release missing NAME", nil, []string{"release", "-force", "-yes", "-postgres", pg}, "missing NAME"},
		{"bad interval", nil, []string{"watch", "-postgres", pg, "-interval", "0s"}, "-interval must be positive"},
		{"negative for", nil, []string{"watch", "-postgres", pg, "-for", "-1s"}, "-for must not be negative"},
		{"table on redis", nil, []string{"list", "-redis", "127.0.0.1:" + l.port(), "-table", "t"}, "-schema and -table apply to -postgres, -sqlserver and -mysql"},
		{"redis prefix on postgres", nil, []string{"list", "-postgres", pg, "-redis-prefix", "x:"}, "-redis-prefix applies to -redis only"},
		{"etcd prefix on postgres", nil, []string{"list", "-postgres", pg, "-etcd-prefix", "x/"}, "-etcd-prefix applies to -etcd only"},
		{"table on etcd", nil, []string{"list", "-etcd", "127.0.0.1:" + l.port(), "-schema", "s"}, "-schema and -table apply to -postgres, -sqlserver and -mysql, not -etcd"},
		{"etcd and postgres", nil, []string{"list", "-etcd", "127.0.0.1:" + l.port(), "-postgres", pg}, "give one store, not -postgres and -etcd"},
		{"unknown flag", nil, []string{"list", "-postgres", pg, "-prefx", "a"}, "flag provided but not defined: -prefx"},
		{"DSN without its flag", nil, []string{"inspect", pg, "name"}, "one NAME only"},
		{"keyword DSN without its flag", nil, []string{"list", "host=127.0.0.1 port=" + l.port() + " password=" + secret}, "unexpected argument"},
		{"DSN as the command", nil, []string{pg}, "unknown command"},
		{"redis address not host:port", nil, []string{"list", "-redis", "127.0.0.1"}, "-redis is not host:port or a redis:// URL"},
		{"postgres DSN unparsable", nil, []string{"list", "-postgres", pg + "?x=%zz"}, "-postgres is not a valid PostgreSQL DSN"},
		{"mysql DSN unparsable", nil, []string{"list", "-mysql", "admin:" + secret + "@tcp(127.0.0.1:" + l.port() + ")"}, "-mysql is not a valid MySQL DSN"},
		{"mysql and postgres", nil, []string{"list", "-mysql", "admin:" + secret + "@tcp(127.0.0.1:" + l.port() + ")/db", "-postgres", pg}, "give one store, not -postgres and -mysql"},
		{"redis prefix on mysql", nil, []string{"list", "-mysql", "admin:" + secret + "@tcp(127.0.0.1:" + l.port() + ")/db", "-redis-prefix", "x:"}, "-redis-prefix applies to -redis only"},
		{"etcd endpoint with a path", nil, []string{"list", "-etcd", "http://127.0.0.1:" + l.port() + "/v3"}, "endpoint 1: it is not host:port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, "", c.env, c.args...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, c.want)
			}
			if strings.Contains(r.stdout+r.stderr, secret) {
				t.Errorf("the password was printed")
			}
			if l.connected(t) {
				t.Errorf("it connected to the store before refusing the command line")
			}
		})
	}
}

// TestHelp: -h starts with a synopsis and two example command lines, exits 0,
// and each command's -h lists its flags.
func TestHelp(t *testing.T) {
	t.Parallel()
	r := run(t, "", nil, "-h")
	lines := strings.Split(r.stdout, "\n")
	if r.code != 0 || len(lines) < 4 || !strings.HasPrefix(lines[0], "usage: leasehold COMMAND") ||
		!strings.HasPrefix(lines[2], "  leasehold ") || !strings.HasPrefix(lines[3], "  leasehold ") {
		t.Fatalf("-h: exit %d; want 0, a synopsis and two examples first", r.code)
	}
	for cmd, flag := range map[string]string{"list": "-prefix", "inspect": "-key-prefix", "release": "-yes", "watch": "-interval"} {
		r := run(t, "", nil, cmd, "-h")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: leasehold") || !strings.Contains(r.stdout, "  "+flag) {
			t.Errorf("%s -h: exit %d; want 0, the synopsis and %s", cmd, r.code, flag)
		}
	}
}

// A name with several holders (WithLimit, on a store that grants it): list
// shows every holding, and release -force -token ends the one named, also
// when another ends first, after showing that one.
func TestReleaseForceOfOneOfSeveralHolders(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *storeEnv) {
		if e.b.Info().MaxLimit < 2 {
			t.Skipf("%s grants exclusive leases only", e.b.Info().Name)
		}
		ctx := context.Background()
		m := newManager(t, e, "cli-sem-"+randomHex(3))
		name := "sem-" + randomHex(4)
		first, err := m.Acquire(ctx, name, leasehold.WithLimit(2), leasehold.WithTTL(longTTL))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		later, err := m.Acquire(ctx, name, leasehold.WithLimit(2), leasehold.WithTTL(2*longTTL)) // ends last
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		r := run(t, "", nil, e.args("list", "-prefix", name)...)
		if lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n"); r.code != 0 || len(lines) != 3 {
			t.Fatalf("list: exit %d, stdout %q; want a header and both holdings", r.code, r.stdout)
		}
		tok := strconv.FormatUint(later.Token(), 10)
		r = run(t, "y\n", nil, e.args("release", "-force", "-token", tok, name)...)
		if r.code != 0 || !strings.Contains(r.stderr, "token "+tok) || !strings.Contains(r.stdout, "token "+tok) {
			t.Fatalf("release -token %s: exit %d, stdout %q, stderr %q; want that holding shown and released", tok, r.code, r.stdout, r.stderr)
		}
		hs, err := e.b.Holders(ctx, name)
		if err != nil || len(hs) != 1 || hs[0].Token != first.Token() {
			t.Fatalf("Holders after the release: %+v, %v; want the first holding alone", hs, err)
		}
	})
}
