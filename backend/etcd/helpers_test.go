package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/etcd"
	"github.com/leasehold/leasehold/backend/etcd/internal/etcdtest"
)

// newBackend returns a backend on cli with the test clusters' minimum TTL.
func newBackend(t *testing.T, cli *clientv3.Client) *etcd.Backend {
	t.Helper()
	b, err := etcd.New(cli, etcd.WithMinTTL(etcdtest.MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// newManager starts a Manager with the given owner, closed when the test
// ends (with a bounded context: a member may be down or paused then).
func newManager(t *testing.T, b *etcd.Backend, owner string) *leasehold.Manager {
	t.Helper()
	m, err := leasehold.New(b, leasehold.WithOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waiters starts, for each lease, an Acquire of its name by m that waits
// forever (and starts again after a backend fault), and checks when it is granted that the lease it replaces had
// already ended (no two holders at once) and that the token went up. The
// returned channel gets the name of each lease so taken over.
func waiters(t *testing.T, m *leasehold.Manager, ls []*leasehold.Lease, ttl time.Duration) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	taken := make(chan string, len(ls))
	done := make(chan struct{}, len(ls))
	for _, old := range ls {
		go func() {
			defer func() { done <- struct{}{} }()
			var l *leasehold.Lease
			for {
				var err error
				l, err = m.Acquire(ctx, old.Name(), leasehold.WithWait(leasehold.WaitForever), leasehold.WithTTL(ttl))
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				// A backend fault (a call that outlived a leader change, a
				// grant that came after its local deadline): campaign again,
				// as an application would.
				t.Logf("waiter on %s: %v; again", old.Name(), err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			select {
			case <-old.Lost():
			default:
				t.Errorf("%s granted to %s (token %d) while %s (token %d) still believed it held it",
					old.Name(), m.Owner(), l.Token(), old.Owner(), old.Token())
			}
			if l.Token() <= old.Token() {
				t.Errorf("%s: token %d after %d", old.Name(), l.Token(), old.Token())
			}
			taken <- old.Name()
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range ls {
			<-done
		}
	})
	return taken
}
