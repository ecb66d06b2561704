package election_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/storetests/localstore"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ttl = 2 * time.Second

// world is three campaigners on one store, each through its own Faulty (to
// make one of them fail its renewals), and what they saw.
type world struct {
	t      *testing.T
	name   string
	faults [3]*backendtest.Faulty
	ms     [3]*leasehold.Manager
	cancel [3]context.CancelFunc
	runs   sync.WaitGroup

	mu      sync.Mutex
	leading []context.Context // every leadership's ctx, in election order
	leaders []string          // the true sequence of leaders
	seen    [3][]string       // what each OnNewLeader reported
	elected chan string
}

func newWorld(t *testing.T, b backend.Backend, name string) *world {
	w := &world{t: t, name: name, elected: make(chan string, 16)}
	for i := range 3 {
		f, wrapped := backendtest.Wrap(b)
		w.faults[i] = f
		m, err := leasehold.New(wrapped, leasehold.WithOwner(fmt.Sprint("node-", i)))
		if err != nil {
			t.Fatal(err)
		}
		w.ms[i] = m
		t.Cleanup(func() { _ = m.Close(context.Background()) })
	}
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel[i] = cancel
		t.Cleanup(cancel)
		w.runs.Go(func() {
			err := election.Run(ctx, w.ms[i], name, election.Callbacks{
				OnStartedLeading: func(ctx context.Context) { w.started(i, ctx) },
				OnNewLeader: func(id string) {
					w.mu.Lock()
					w.seen[i] = append(w.seen[i], id)
					w.mu.Unlock()
				},
			}, leasehold.WithTTL(ttl))
			if err != nil {
				t.Errorf("Run %d: %v", i, err)
			}
		})
	}
	t.Cleanup(w.runs.Wait)
	return w
}

// started checks that no earlier leadership is still live, records this one
// and leads until ctx ends.
func (w *world) started(i int, ctx context.Context) {
	w.mu.Lock()
	for _, other := range w.leading {
		if other.Err() == nil {
			w.t.Errorf("node-%d elected while another leadership is live", i)
		}
	}
	if l, ok := leasehold.LeaseFrom(ctx); !ok || l.Token() == 0 {
		w.t.Errorf("node-%d: LeaseFrom(leading ctx) = %v, %v", i, l, ok)
	}
	w.leading = append(w.leading, ctx)
	id := fmt.Sprint("node-", i)
	w.leaders = append(w.leaders, id)
	w.mu.Unlock()
	w.elected <- id
	<-ctx.Done()
}

func (w *world) nextLeader(within time.Duration) (string, time.Duration) {
	w.t.Helper()
	start := time.Now()
	select {
	case id := <-w.elected:
		return id, time.Since(start)
	case <-time.After(within):
		w.t.Fatalf("no leader elected within %v", within)
		return "", 0
	}
}

func index(id string) int {
	var i int
	fmt.Sscanf(id, "node-%d", &i)
	return i
}

func testElection(t *testing.T, b backend.Backend, name string) {
	w := newWorld(t, b, name)
	first, _ := w.nextLeader(10 * time.Second)
	if id, ok, err := election.Leader(context.Background(), w.ms[(index(first)+1)%3], name); err != nil || !ok || id != first {
		t.Errorf("Leader = %q, %v, %v; want %q", id, ok, err, first)
	}

	// The leader is cut off from the store: it loses leadership at its
	// local deadline, and another is elected once the store lets the lease
	// expire, within TTL + one renew period.
	w.faults[index(first)].Partition(true)
	second, took := w.nextLeader(ttl + ttl/3 + 3*time.Second)
	if second == first {
		t.Fatalf("%s re-elected while its renewals fail", first)
	}
	t.Logf("after expiry: %s elected in %v", second, took)
	w.faults[index(first)].Partition(false)

	// Resigning (cancelling Run's ctx) releases at once: the next leader
	// does not wait for the TTL.
	w.cancel[index(second)]()
	third, took := w.nextLeader(ttl - 200*time.Millisecond)
	if third == second {
		t.Fatalf("%s re-elected after resigning", second)
	}
	t.Logf("after resigning: %s elected in %v", third, took)

	for i := range 3 {
		w.cancel[i]()
	}
	w.runs.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, seen := range w.seen {
		if !subsequence(seen, w.leaders) {
			t.Errorf("node-%d saw leaders %v, not in the order they led: %v", i, seen, w.leaders)
		}
	}
}

// subsequence reports whether every element of sub appears in seq, in order.
func subsequence(sub, seq []string) bool {
	j := 0
	for _, s := range sub {
		for j < len(seq) && seq[j] != s {
			j++
		}
		if j == len(seq) {
			return false
		}
		j++
	}
	return true
}

func TestElectionOnMemory(t *testing.T) {
	testElection(t, memory.New(), "leader")
}

func TestElectionOnRedis(t *testing.T) {
	testElection(t, localstore.Redis(t), fmt.Sprintf("election-test-%d", time.Now().UnixNano()))
}

func TestElectionOnPostgres(t *testing.T) {
	testElection(t, localstore.Postgres(t, "election_test"), fmt.Sprintf("election-test-%d", time.Now().UnixNano()))
}
