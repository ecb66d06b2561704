package etcd_test

import (
	"net/url"
	"testing"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/etcd"
	"github.com/leasehold/leasehold/backend/etcd/internal/etcdtest"
	"github.com/leasehold/leasehold/internal/faultproxy"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// TestConformance runs the whole conformance suite on a three-member cluster,
// every client talking to all three members (through fault proxies for the
// rows that black-hole the link).
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
	o := backendtest.Options{TTLUnit: etcdtest.MinTTL, Blackhole: blackholed(c)}
	backendtest.RunWith(t, o, newBackend)
	leaseholdtest.RunWith(t, o, newBackend)
}

// blackholed is the conformance suites' Options.Blackhole: a backend whose
// client reaches every member of c through a fault proxy of its own, all
// black-holed together.
func blackholed(c *etcdtest.Cluster) func(t *testing.T) (backend.Backend, func()) {
	return func(t *testing.T) (backend.Backend, func()) {
		var (
			proxies   []*faultproxy.Proxy
			endpoints []string
		)
		for _, ep := range c.Endpoints() {
			u, err := url.Parse(ep)
			if err != nil {
				t.Fatal(err)
			}
			p, err := faultproxy.New(u.Host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			proxies = append(proxies, p)
			endpoints = append(endpoints, u.Scheme+"://"+p.Addr())
		}
		b, err := etcd.New(c.Client(endpoints...), etcd.WithMinTTL(etcdtest.MinTTL))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // before the client is closed
			for _, p := range proxies {
				p.Blackhole(false)
			}
			_ = b.Close()
		})
		return b, func() {
			for _, p := range proxies {
				p.Blackhole(true)
			}
		}
	}
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
