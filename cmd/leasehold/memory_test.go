package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

// TestInProcessMemory runs the commands in-process on the memory backend
// (which has every capability, release notifications included): the same
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
