package redistest_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServerRestartLosesData(t *testing.T) {
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if err := c.Get(ctx, "k").Err(); err == nil {
		// The first call after a restart may meet the dead pooled connection.
		t.Log("first call after restart succeeded")
	}
	n, err := c.Exists(ctx, "k").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("key survived a restart without persistence")
	}
}

func TestServerRestartFromSnapshotLosesLaterWrites(t *testing.T) {
	s := redistest.Start(t)
	c := redistest.NewClient(t, s.Addr())
	ctx := context.Background()
	if err := c.Set(ctx, "k", "saved", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "k", "lost", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	var got string
	var err error
	for range 3 { // the first calls may meet dead pooled connections
		if got, err = c.Get(ctx, "k").Result(); err == nil {
			break
		}
	}
	if err != nil || got != "saved" {
		t.Fatalf("after a restart from the snapshot: %q, %v; want the saved value", got, err)
	}
}

func TestProxyFaults(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.NewProxy(t, s.Addr())
	c := redistest.NewClient(t, p.Addr())
	direct := redistest.NewClient(t, s.Addr())
	ctx := context.Background()

	if err := c.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	p.DropReplies(true)
	if err := c.Set(ctx, "k", "2", 0).Err(); err == nil {
		t.Fatal("reply was dropped, yet SET reported success")
	}
	if got := direct.Get(ctx, "k").Val(); got != "2" {
		t.Fatalf("request should have reached the server: got %q", got)
	}
	if p.RepliesDropped() == 0 {
		t.Fatal("RepliesDropped did not count")
	}
	p.DropReplies(false)

	p.Blackhole(true)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Get(short, "k").Err()
	cancel()
	if err == nil {
		t.Fatal("black-holed GET succeeded")
	}
	p.Blackhole(false)
	p.CutAll()

	p.SetDelay(100 * time.Millisecond)
	start := time.Now()
	if err := c.Get(ctx, "k").Err(); err != nil {
		t.Fatalf("slow GET: %v", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("delay not applied both ways: %v", el)
	}
	p.SetDelay(0)

	p.Close()
	if err := c.Ping(ctx).Err(); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("ping through a closed proxy: %v", err)
	}
}

func TestClusterServesEverySlotAndFailsOver(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	masters := c.Masters(ctx)
	if len(masters) != 3 {
		t.Fatalf("%d masters, want 3", len(masters))
	}
	replica := c.ReplicaOf(ctx, masters[0])
	c.Failover(ctx, replica, "")
	if got := c.ReplicaOf(ctx, replica); got != masters[0] {
		t.Fatalf("after the failover, the replica of %s is %s, want the old master", replica.Addr(), got.Addr())
	}
}

func TestSentinelFailover(t *testing.T) {
	g := redistest.StartSentinel(t, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := g.Primary(ctx)
	from, to := g.Failover(ctx)
	if from != first || to == first {
		t.Fatalf("failover from %s to %s; the primary was %s", from.Addr(), to.Addr(), first.Addr())
	}
	g.WaitReplicated(ctx)
}

// Every process of a cluster is gone once the test
// that started it ends (t.Cleanup runs whether the test passed or failed).
func TestClusterProcessesEndWithTheirTest(t *testing.T) {
	var addrs []string
	t.Run("cluster", func(t *testing.T) {
		addrs = append(addrs, redistest.StartCluster(t, 3, 0, time.Second).Addrs()...)
	})
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after its test ended", a)
		}
	}
}
