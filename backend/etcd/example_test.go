package etcd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/etcd"
)

// One job run by one process at a time through an etcd cluster. It needs a
// running cluster ($ETCD_ENDPOINTS, comma-separated; the tests start their
// own), so it is compiled but not run by go test.
func Example() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(os.Getenv("ETCD_ENDPOINTS"), ","), // every member: the client fails over
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	store, err := etcd.New(cli) // keys under "leasehold/"; WithKeyPrefix sets another
	if err != nil {
		panic(err)
	}
	defer store.Close()
	m, err := leasehold.New(store, leasehold.WithOwner("worker-1"))
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	// etcd leases last whole seconds: a TTL must be a whole number of them,
	// at least the backend's minimum (2s, WithMinTTL).
	err = m.Do(ctx, "nightly-report", func(ctx context.Context) error {
		l, _ := leasehold.LeaseFrom(ctx)
		fmt.Println("running the nightly report with fencing token", l.Token())
		return nil // ctx is cancelled if the lease is lost meanwhile
	}, leasehold.WithTTL(10*time.Second), leasehold.WithWait(time.Minute))
	fmt.Println("done:", err)
}
