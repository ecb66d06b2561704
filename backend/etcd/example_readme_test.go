package etcd_test

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/etcd"
)

// The Go block of docs/backends/etcd.md, verbatim between the markers
// (readme_test.go in the root module checks it). It needs the cluster the
// block names, so it is compiled but not run by go test.
func Example_readme() {
	// docs/backends/etcd.md
	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"}})
	b, _ := etcd.New(cli, etcd.WithMinTTL(2*time.Second)) // also WithKeyPrefix, WithLogger
	m, _ := leasehold.New(b)
	// end docs
	defer cli.Close()
	defer b.Close()
	defer m.Close(context.Background())
	fmt.Println("backend:", m.BackendInfo().Name)
}
