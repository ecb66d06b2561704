package etcd_test

import (
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/etcd"
	"github.com/leasehold/leasehold/backend/etcd/internal/etcdtest"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs the whole conformance suite on a three-member cluster,
// every client talking to all three members.
func TestConformance(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	cli := c.Client()
	newBackend := func(t *testing.T) backend.Backend {
		b, err := etcd.New(cli, etcd.WithMinTTL(etcdtest.MinTTL))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	backendtest.RunWith(t, backendtest.Options{TTLUnit: etcdtest.MinTTL}, newBackend)
	leaseholdtest.RunWith(t, leaseholdtest.Options{TTLUnit: etcdtest.MinTTL}, newBackend)
}

// TestConformanceNamespaces: backends with nested key prefixes on one
// cluster share nothing.
func TestConformanceNamespaces(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t, 1).Client()
	backendtest.RunNamespaces(t, func(t *testing.T, prefix string) backend.Backend {
		b, err := etcd.New(cli, etcd.WithMinTTL(etcdtest.MinTTL), etcd.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
