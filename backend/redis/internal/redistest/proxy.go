package redistest

import (
	"testing"

	"github.com/leasehold/leasehold/internal/faultproxy"
)

// Proxy is a TCP proxy in the test process between a client and a server,
// which the test controls: cut every connection, lose the replies of the
// requests that do get through (an ambiguous outcome for the client),
// black-hole the link, stall the connections open now, or slow it down. It
// is a faultproxy.Proxy bound to a test.
type Proxy struct {
	*faultproxy.Proxy
}

// NewProxy starts a proxy to target on a free loopback port; it is closed in
// t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return &Proxy{p}
}
