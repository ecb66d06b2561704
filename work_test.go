package leasehold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
)

const workPatience = 30 * time.Second

// heldAs reports whether store has name held by l's holding.
func heldAs(store *memory.Backend, l *leasehold.Lease) bool {
	h, ok, err := store.Inspect(context.Background(), l.Name())
	return err == nil && ok && h.Token == l.Token()
}

// Manager.Close ends Do's function and releases the lease only after it has
// returned: while the function finishes, honouring its ctx, the store still
// has the lease held.
func TestCloseReleasesAfterDosFunction(t *testing.T) {
	store := memory.New()
	m := newManagerOn(t, store)
	started := make(chan struct{})
	held := make(chan bool, 1)
	did := make(chan error, 1)
	go func() {
		did <- m.Do(context.Background(), "job", func(ctx context.Context) error {
			l, _ := leasehold.LeaseFrom(ctx)
			close(started)
			<-ctx.Done()
			held <- l.Err() == nil && poll.Throughout(200*time.Millisecond, func() bool { return heldAs(store, l) })
			return ctx.Err()
		})
	}()
	poll.Receive(t, "Do's function starting", workPatience, started)
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	if !poll.Receive(t, "Do's function returning", workPatience, held) {
		t.Error("the lease was released (or its handle ended) while Do's function still ran after Manager.Close")
	}
	if err := poll.Receive(t, "Close returning", workPatience, closed); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := poll.Receive(t, "Do returning", workPatience, did); !errors.Is(err, context.Canceled) || errors.Is(err, leasehold.ErrLost) {
		t.Errorf("Do = %v, want the function's context.Canceled and no ErrLost", err)
	}
	if _, ok, _ := store.Inspect(context.Background(), "job"); ok {
		t.Error("the lease is still held after Close")
	}
}

// A Release from another goroutine waits for the lease's Work; one from
// inside the work, with its ctx, does not wait on itself.
func TestReleaseWaitsForWorkButNotFromInside(t *testing.T) {
	store := memory.New()
	m := newManagerOn(t, store)
	ctx := context.Background()

	l, err := m.Acquire(ctx, "outside")
	if err != nil {
		t.Fatal(err)
	}
	work, done := l.Work()
	released := make(chan error, 1)
	go func() { released <- l.Release(ctx) }()
	poll.Receive(t, "the work's context ending", workPatience, work.Done())
	if !errors.Is(context.Cause(work), leasehold.ErrReleased) {
		t.Errorf("the work's cause = %v, want ErrReleased", context.Cause(work))
	}
	if !poll.Throughout(100*time.Millisecond, func() bool { return heldAs(store, l) && l.Err() == nil }) {
		t.Error("released while its work still ran")
	}
	done()
	if err := poll.Receive(t, "Release returning", workPatience, released); err != nil {
		t.Errorf("Release = %v", err)
	}
	if heldAs(store, l) || !errors.Is(l.Err(), leasehold.ErrReleased) {
		t.Errorf("after Release: held %v, Err %v", heldAs(store, l), l.Err())
	}
	if w, _ := l.Work(); w.Err() == nil {
		t.Error("Work on a released lease gave a live context")
	}

	err = m.Do(ctx, "inside", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		rctx, cancel := context.WithTimeout(ctx, workPatience)
		defer cancel()
		if err := l.Release(rctx); err != nil {
			return err
		}
		if _, ok, _ := store.Inspect(context.Background(), "inside"); ok {
			return errors.New("still held after its own Release")
		}
		return nil
	})
	if err != nil {
		t.Errorf("Do with a Release from inside = %v", err)
	}
}

// A Release whose ctx ends while the work runs returns ctx's error; the
// lease stays held until the work returns, and is released then.
func TestReleaseGoesOnAfterItsContextEnds(t *testing.T) {
	store := memory.New()
	m := newManagerOn(t, store)
	l, err := m.Acquire(context.Background(), "n")
	if err != nil {
		t.Fatal(err)
	}
	_, done := l.Work()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Release(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Release = %v, want context.Canceled", err)
	}
	if !heldAs(store, l) {
		t.Error("released while its work still ran")
	}
	done()
	poll.Until(t, "the release after the work returned", workPatience, func() bool { return !heldAs(store, l) })
	if !errors.Is(l.Err(), leasehold.ErrReleased) {
		t.Errorf("Err = %v, want ErrReleased", l.Err())
	}
}
