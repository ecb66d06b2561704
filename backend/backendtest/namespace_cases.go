package backendtest

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// RunNamespaces checks that backends in different namespaces never see each
// other's leases, even when one namespace's prefix starts the other's.
// newNamespaced makes a backend on the same store in the namespace named
// prefix: with the backend's key prefix option where it has one (Redis,
// etcd), else in the namespace the backend has (a table of its own, a store
// of its own). The row passes it prefix+"p/" and prefix+"p/app/", so that
// the first's "app/job" and the second's "job" would be one key if the
// backend's keys were the prefix and the name put end to end.
func RunNamespaces(t *testing.T, newNamespaced func(t *testing.T, prefix string) backend.Backend) {
	t.Run("NestedPrefixesShareNothing", func(t *testing.T) {
		base := uniq(t)
		outer, inner := newNamespaced(t, base+"p/"), newNamespaced(t, base+"p/app/")
		ctx := ctxT(t)
		o := mustGrant(t, outer, "app/job", "outer-owner", time.Minute)
		g := acquire(t, inner, "job", "inner-owner", time.Minute)
		if !g.Acquired {
			t.Fatalf("inner Acquire(job) with the outer namespace holding app/job: %+v; want granted", g.Grant)
		}
		for _, c := range []struct {
			name  string
			b     backend.Backend
			key   string
			owner string // "" for not held
		}{
			{"outer", outer, "app/job", "outer-owner"},
			{"outer", outer, "job", ""},
			{"inner", inner, "job", "inner-owner"},
			{"inner", inner, "app/job", ""},
		} {
			h, held, err := c.b.Inspect(ctx, c.key)
			if err != nil || held != (c.owner != "") || (held && h.Owner != c.owner) {
				t.Errorf("%s Inspect(%q) = %+v, held %v, %v; want held by %q", c.name, c.key, h, held, err, c.owner)
			}
		}
		for _, c := range []struct {
			name   string
			b      backend.Backend
			prefix string
			want   []string
		}{
			{"outer", outer, "", []string{"app/job outer-owner"}},
			{"outer", outer, "app/", []string{"app/job outer-owner"}},
			{"inner", inner, "", []string{"job inner-owner"}},
			{"inner", inner, "app/", nil},
		} {
			var got []string
			if err := c.b.List(ctx, c.prefix, func(h backend.Holder) bool {
				got = append(got, h.Key+" "+h.Owner)
				return true
			}); err != nil {
				t.Fatalf("%s List(%q): %v", c.name, c.prefix, err)
			}
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("%s List(%q) = %q, want %q", c.name, c.prefix, got, c.want)
			}
		}
		// Releasing one namespace's holding leaves the other's alone.
		if err := outer.Release(ctx, o.releaseReq()); err != nil {
			t.Fatal(err)
		}
		if h, held, err := inner.Inspect(ctx, "job"); err != nil || !held || h.Token != g.Token {
			t.Errorf("inner Inspect(job) after the outer release: %+v, held %v, %v; want still held", h, held, err)
		}
		if err := inner.Release(ctx, g.releaseReq()); err != nil {
			t.Fatal(err)
		}
	})
}
