package redis

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
	goredis "github.com/redis/go-redis/v9"
)

// The environment of the waiting child process (TestKilledWaiterChild).
const (
	killChildAddr   = "LEASEHOLD_KILL_CHILD_ADDR"
	killChildPrefix = "LEASEHOLD_KILL_CHILD_PREFIX"
)

// A process that dies (kill -9) while it waits in a name's queue delays the
// waiter behind it by at most its pickup window and that waiter's poll
// period: the name handed to the dead process is taken back and goes on.
func TestKilledWaiterDelaysOthersAtMostItsPickupWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	b := newTestBackend(t, c)
	holder := newManager(t, b, "holder")
	l1, err := holder.Acquire(ctxT(t), "job")
	if err != nil {
		t.Fatal(err)
	}

	// The child waits for "job" and says so once the store has queued it.
	child := exec.Command(os.Args[0], "-test.run=^TestKilledWaiterChild$", "-test.v")
	child.Env = append(os.Environ(), killChildAddr+"="+s.Addr(), killChildPrefix+"="+b.cfg.prefix)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	queued := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "queued" {
				close(queued)
				break
			}
		}
		for sc.Scan() { // drain until the child is gone
		}
	}()
	select {
	case <-queued:
	case <-time.After(20 * time.Second):
		t.Fatal("the child never said it was queued")
	}

	// The waiter behind it, in this process.
	const pickup = 300 * time.Millisecond
	w := signalCalls(b)
	waiter := newManager(t, w, "waiter", leasehold.WithPickupWindow(pickup))
	got := make(chan error, 1)
	var l2 *leasehold.Lease
	go func() {
		var err error
		l2, err = waiter.Acquire(ctxT(t), "job", leasehold.WithWait(leasehold.WaitForever))
		got <- err
	}()
	select {
	case <-w.queued:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was never queued")
	}
	if n, err := c.LLen(ctxT(t), b.keysOf("job")[2]).Result(); err != nil || n < 2 {
		t.Fatalf("queue of %q has %d entries (%v), want 2", "job", n, err)
	}

	if err := child.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	_ = child.Wait()
	start := time.Now()
	if err := l1.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter behind the killed one: %v", err)
	}
	took := time.Since(start)
	t.Logf("the waiter got the name %v after the release (the killed waiter's pickup window: %v; the waiter's own: %v)", took, pickup, pickup)
	if l2.Token() <= l1.Token() {
		t.Errorf("token %d after %d", l2.Token(), l1.Token())
	}
	// Bounds with room for a loaded machine: the window the killed waiter
	// had, the waiter's poll period, and scheduling.
	if took > 20*pickup { // without the window it would be the TTL, 30 s
		t.Errorf("the killed waiter held the others up for %v (pickup windows %v)", took, pickup)
	}
}

// TestKilledWaiterChild is the waiting process of the test above (skipped
// unless it runs as that child): it waits for "job" with a short pickup
// window, prints "queued" once the store has queued it, and waits until it
// is killed.
func TestKilledWaiterChild(t *testing.T) {
	addr := os.Getenv(killChildAddr)
	if addr == "" {
		t.Skip("the child process of TestKilledWaiterDelaysOthersAtMostItsPickupWindow")
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	b, err := New(c, WithKeyPrefix(os.Getenv(killChildPrefix)))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b)
	_, wrapped := backendtest.Wrap(b) // each call on its own, as before
	w := signalCalls(wrapped)
	m, err := leasehold.New(w, leasehold.WithOwner("doomed"), leasehold.WithPickupWindow(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = m.Acquire(context.Background(), "job", leasehold.WithWait(leasehold.WaitForever)) }()
	select {
	case <-w.queued:
	case <-time.After(20 * time.Second):
		t.Fatal("never queued")
	}
	fmt.Println("queued")
	select {} // until kill -9
}
