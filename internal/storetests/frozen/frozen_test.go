package frozen_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// ttl is the child's lease TTL: its holding expires this long after the
// child stops renewing.
const ttl = time.Second

// The environment of a child (TestFrozenHolderChild).
const (
	childStore = "LEASEHOLD_FROZEN_CHILD_STORE"
	childName  = "LEASEHOLD_FROZEN_CHILD_NAME"
)

// A child process A acquires a lease and reports its token; the test stops
// it (SIGSTOP), so that it renews no more, and acquires the name itself as
// B, waiting on the store until A's holding has expired; B writes through
// the guard; the test lets A go on (SIGCONT) and has it write through the
// guard with its old token: the guard refuses it with ErrStaleToken, and
// B's data stands. The unguarded variant makes the same late write around
// the guard, and it lands over B's: the guard is what stops it.
func TestFrozenHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, kind := range []string{"redis", "postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Run("Guarded", func(t *testing.T) { runFrozen(t, kind, true) })
			t.Run("Unguarded", func(t *testing.T) { runFrozen(t, kind, false) })
		})
	}
}

func runFrozen(t *testing.T, kind string, guard bool) {
	name := fmt.Sprintf("lh_frozen_%d", time.Now().UnixNano())
	s := newStore(t, kind, name, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()

	a := startChild(t, kind, name)
	tokenA, err := strconv.ParseUint(a.expect(t, "token"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	// B waits on the store until A's holding has expired and B is granted.
	mB, err := leasehold.New(s.backend(t), leasehold.WithOwner("holder-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer mB.Close(context.Background())
	lb, err := mB.Acquire(ctx, name, leasehold.WithTTL(patience), leasehold.WithWait(patience))
	if err != nil {
		t.Fatalf("B's Acquire while A is stopped: %v", err)
	}
	defer lb.Release(context.Background())
	if lb.Token() <= tokenA {
		t.Fatalf("B's token %d is not above A's %d", lb.Token(), tokenA)
	}
	if err := s.guarded(ctx, lb.Token(), "B's work"); err != nil {
		t.Fatalf("B's write: %v", err)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	cmd := "unguarded"
	if guard {
		cmd = "guarded"
	}
	if _, err := io.WriteString(a.stdin, cmd+"\n"); err != nil {
		t.Fatal(err)
	}
	result := a.expect(t, "result")
	got, err := s.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if guard {
		if want := fmt.Sprintf("stale %d", lb.Token()); result != want {
			t.Fatalf("A's late write through the guard: %q, want %q", result, want)
		}
		if got != "B's work" {
			t.Fatalf("the resource holds %q after A's refused write, want B's work", got)
		}
		return
	}
	if result != "ok" {
		t.Fatalf("A's late write around the guard: %q, want ok", result)
	}
	if got != "A's late work" {
		t.Fatalf("the resource holds %q after A's unguarded write; the stale write should have landed", got)
	}
}

// kid is a child process and its reports, one per line.
type kid struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startChild(t *testing.T, kind, name string) *kid {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFrozenHolderChild$", "-test.v")
	cmd.Env = append(os.Environ(), childStore+"="+kind, childName+"="+name)
	stdin, err := cmd.StdinPipe() // the child stops when it closes
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k := &kid{cmd: cmd, stdin: stdin, lines: make(chan string, 100)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case k.lines <- sc.Text():
			default: // nobody reads any more
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		select {
		case <-read:
		case <-time.After(patience):
			t.Errorf("the child's output did not end within %v of the kill", patience)
		}
		_ = cmd.Wait()
	})
	return k
}

// expect returns the rest of the child's next line starting with word.
func (k *kid) expect(t *testing.T, word string) string {
	t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case line := <-k.lines:
			if rest, ok := strings.CutPrefix(line, word+" "); ok {
				return rest
			}
			if line == word {
				return ""
			}
		case <-deadline:
			t.Fatalf("the child reported no %q within %v", word, patience)
		}
	}
}

// TestFrozenHolderChild is holder A of TestFrozenHolder (skipped unless it
// runs as that child): it acquires the name with a short TTL and reports its
// token, then, at "guarded" or "unguarded" on stdin, writes "A's late work"
// with that token through the guard or around it and reports the result; it
// stops when stdin closes.
func TestFrozenHolderChild(t *testing.T) {
	kind, name := os.Getenv(childStore), os.Getenv(childName)
	if kind == "" {
		t.Skip("the child process of TestFrozenHolder")
	}
	s := newStore(t, kind, name, false)
	m, err := leasehold.New(s.backend(t), leasehold.WithOwner("holder-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()
	l, err := m.Acquire(ctx, name, leasehold.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("token", l.Token())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		// The write of a holder that has not noticed its loss: its token
		// is the one it was granted, whatever its lease says by now.
		var err error
		switch sc.Text() {
		case "guarded":
			err = s.guarded(ctx, l.Token(), "A's late work")
		case "unguarded":
			err = s.unguarded(ctx, "A's late work")
		default:
			continue
		}
		var se *leasehold.StaleTokenError
		switch {
		case err == nil:
			fmt.Println("result ok")
		case errors.As(err, &se) && errors.Is(err, leasehold.ErrStaleToken):
			fmt.Println("result stale", se.Highest)
		default:
			fmt.Println("result error", err)
		}
	}
}
