package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
)

// TestInProcessMemory runs the commands in-process on the memory backend
// (which announces releases, as the watch command uses): the same
// code as the binary, without a store server.
func TestInProcessMemory(t *testing.T) {
	b := memory.New()
	m, err := leasehold.New(b, leasehold.WithOwner("mem-owner"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	sub := m.Subscribe(4)
	defer sub.Close()
	l, err := m.Acquire(context.Background(), "app/job", leasehold.WithTTL(time.Minute),
		leasehold.WithRenewEvery(50*time.Millisecond), leasehold.WithMetadata("\x1b[31mred"))
	if err != nil {
		t.Fatal(err)
	}
	runIn := func(stdin string, args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		a := &app{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr,
			getenv: func(string) string { return "" },
			open: func(context.Context, target) (*store, error) {
				return &store{b: b, desc: "memory", redact: func(s string) string { return s }, close: func() {}}, nil
			}}
		code := a.run(context.Background(), append(args, "-postgres", "unused"))
		return stdout.String(), stderr.String(), code
	}

	out, _, code := runIn("", "list", "-key-prefix", "app/")
	if code != 0 || !strings.Contains(out, "job ") || !strings.Contains(out, `\x1b[31mred`) || strings.Contains(out, "\x1b") {
		t.Errorf("list: exit %d, %q; want the name without the key prefix and the escape sequence shown escaped", code, out)
	}
	// inspect -json of a free name says which name it is about.
	if out, _, code := runIn("", "inspect", "-json", "-key-prefix", "app/", "other"); code != 0 || out != "{\"held\":false,\"name\":\"other\",\"key\":\"app/other\"}\n" {
		t.Errorf("inspect -json of a free name: exit %d, %q; want held false with its name and key", code, out)
	}
	out, _, code = runIn("", "inspect", "app/job")
	if code != 0 || !strings.Contains(out, "mem-owner") {
		t.Errorf("inspect: exit %d, %q", code, out)
	}
	if _, errOut, code := runIn("no\n", "release", "-force", "app/job"); code != 1 || !strings.Contains(errOut, "not confirmed") {
		t.Errorf("release answered no: exit %d, %q", code, errOut)
	}
	if out, _, code := runIn("y\n", "release", "-force", "app/job"); code != 0 || !strings.HasPrefix(out, "released app/job") {
		t.Errorf("release answered y: exit %d, %q", code, out)
	}
	select {
	case ev := <-sub.Events():
		if ev.Reason != leasehold.ReasonRejected || ev.Token != l.Token() {
			t.Errorf("loss %+v, want ReasonRejected for token %d", ev, l.Token())
		}
	case <-time.After(time.Minute):
		t.Fatal("no loss event")
	}
	if out, _, code := runIn("", "watch", "-for", "10ms"); code != 0 || out != "" {
		t.Errorf("watch -for 10ms on an empty store: exit %d, %q", code, out)
	}
}

// lostRevoke is a memory store whose Revoke answers as one whose answer was
// lost and whose holding was gone when it looked again.
type lostRevoke struct{ *memory.Backend }

func (l lostRevoke) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	if _, _, err := l.Backend.Revoke(ctx, key, token); err != nil {
		return backend.Holder{}, false, err
	}
	return backend.Holder{}, false, fmt.Errorf("store: revoke %q: %w", key, backend.ErrRevokeUnconfirmed)
}

// onRead runs f when the prompt's answer is read, then answers "y": the name
// changes while the operator reads the question.
type onRead struct {
	f    func()
	done bool
}

func (r *onRead) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	r.done = true
	r.f()
	return copy(p, "y\n"), nil
}

// TestReleaseSaysWhatItKnows: release tells "released" from "nothing was
// there" from "the answer was lost", says what holds the name when nothing
// was released, and exits 0 exactly when the name ends up free or released.
func TestReleaseSaysWhatItKnows(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	runIn := func(b backend.Backend, stdin io.Reader, args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		a := &app{stdin: stdin, stdout: &stdout, stderr: &stderr,
			getenv: func(string) string { return "" },
			open: func(context.Context, target) (*store, error) {
				return &store{b: b, desc: "memory", redact: func(s string) string { return s }, close: func() {}}, nil
			}}
		code := a.run(ctx, append(args, "-postgres", "unused"))
		return stdout.String(), stderr.String(), code
	}
	grant := func(owner string) backend.Grant {
		t.Helper()
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "job", Owner: owner, Attempt: "a-" + randomHex(4), TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		return g
	}
	revokeAll := func() {
		if _, _, err := b.Revoke(ctx, "job", 0); err != nil {
			t.Fatal(err)
		}
	}

	// The answer was lost: not "nothing released", and not exit 0.
	grant("o1")
	_, errOut, code := runIn(lostRevoke{b}, strings.NewReader(""), "release", "-force", "-yes", "job")
	if code != exitFailure || !strings.Contains(errOut, "this command may be what ended it") || strings.Contains(errOut, "nothing released") {
		t.Errorf("release whose answer was lost: exit %d, %q", code, errOut)
	}

	// -token of a free name: nothing to end, exit 0.
	if _, errOut, code := runIn(b, strings.NewReader(""), "release", "-force", "-yes", "-token", "7", "job"); code != exitOK || !strings.Contains(errOut, "job is free: nothing released") {
		t.Errorf("release -token of a free name: exit %d, %q", code, errOut)
	}

	// Granted anew while the question was on the screen: exit 1, naming the
	// new token; the new holding stays.
	old := grant("o1")
	var next backend.Grant
	_, errOut, code = runIn(b, &onRead{f: func() { revokeAll(); next = grant("o2") }}, "release", "-force", "job")
	want := fmt.Sprintf("job changed since it was shown: it is held with token %d now, not %d: nothing released", next.Token, old.Token)
	if code != exitFailure || !strings.Contains(errOut, want) {
		t.Errorf("release of a holding replaced at the prompt: exit %d, %q; want %q", code, errOut, want)
	}
	if h, held, err := b.Inspect(ctx, "job"); err != nil || !held || h.Token != next.Token {
		t.Errorf("the new holding: %+v, held %v, %v; want kept", h, held, err)
	}

	// Ended while the question was on the screen: the name is free, exit 0.
	_, errOut, code = runIn(b, &onRead{f: revokeAll}, "release", "-force", "job")
	if code != exitOK || !strings.Contains(errOut, "job is free: the holding shown (token "+strconv.FormatUint(next.Token, 10)+") ended before the release reached it") {
		t.Errorf("release of a holding ended at the prompt: exit %d, %q", code, errOut)
	}

	// -token of another holding: exit 1, naming the holding's token.
	cur := grant("o3")
	_, errOut, code = runIn(b, strings.NewReader(""), "release", "-force", "-yes", "-token", strconv.FormatUint(old.Token, 10), "job")
	if code != exitFailure || !strings.Contains(errOut, fmt.Sprintf("job is held with token %d, not %d", cur.Token, old.Token)) {
		t.Errorf("release -token of an older holding: exit %d, %q", code, errOut)
	}
}
