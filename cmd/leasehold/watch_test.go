package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// fixedLister answers List with whatever the test set last.
type fixedLister struct {
	mu sync.Mutex
	hs []backend.Holder
}

func (f *fixedLister) set(hs ...backend.Holder) {
	f.mu.Lock()
	f.hs = hs
	f.mu.Unlock()
}

func (f *fixedLister) List(_ context.Context, prefix string, fn func(backend.Holder) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.hs {
		if strings.HasPrefix(h.Key, prefix) && !fn(h) {
			break
		}
	}
	return nil
}

// TestWatchDiff: the events of successive looks, on a clock the test moves:
// a new key or a new token is a grant; a key gone before the expiry last
// seen is a release, gone at or after it an expiry; a notification dates the
// end more closely than the next look (but is no proof of a release: etcd
// announces expiries too); renewals are no event.
func TestWatchDiff(t *testing.T) {
	var out bytes.Buffer
	l := &fixedLister{}
	now := time.Unix(1000, 0)
	w := &watcher{
		out: &out, errOut: &out, redact: func(s string) string { return s }, o: &opts{timeout: time.Second},
		list: l, prefix: "p/", interval: time.Second, now: func() time.Time { return now },
		wake: make(chan struct{}, 1),
	}
	h := func(key string, token uint64, left time.Duration) backend.Holder {
		return backend.Holder{Key: key, Owner: "o-" + key, Token: token, ExpiresIn: left}
	}
	step := func(d time.Duration, want string, hs ...backend.Holder) {
		t.Helper()
		now = now.Add(d)
		l.set(hs...)
		out.Reset()
		w.poll(context.Background())
		got := []string{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if f := strings.Fields(line); len(f) == 5 {
				got = append(got, f[1]+" "+f[2]+" "+f[4])
			}
		}
		if strings.Join(got, ", ") != want {
			t.Fatalf("at +%v: events %q, want %q", now.Sub(time.Unix(1000, 0)), strings.Join(got, ", "), want)
		}
	}
	w.last = map[string]seen{}
	step(0, "granted p/a token=1, granted p/b token=2", h("p/a", 1, 10*time.Second), h("p/b", 2, 3*time.Second), h("q/x", 9, time.Second))
	step(time.Second, "", h("p/a", 1, 10*time.Second), h("p/b", 2, 2*time.Second)) // renewed: nothing
	step(time.Second, "released p/a token=1", h("p/b", 2, 2*time.Second))          // a gone 2 s before its end
	step(2*time.Second, "expired p/b token=2")                                     // b gone at its end
	step(time.Second, "granted p/a token=3", h("p/a", 3, 5*time.Second))
	step(time.Second, "released p/a token=3, granted p/a token=4", h("p/a", 4, 5*time.Second)) // replaced before its end
	now = now.Add(4 * time.Second)
	w.notify("p/a") // 1 s before its end
	w.notify("q/x") // not under the prefix: ignored
	if len(w.wake) != 1 {
		t.Fatalf("a release notification did not wake the watch")
	}
	<-w.wake
	now = now.Add(time.Second)
	w.notify("p/a")                             // a later notification does not move the first
	step(5*time.Second, "released p/a token=4") // looked at long after its end, but announced before it
	step(time.Second, "granted p/c token=5", h("p/c", 5, time.Second))
	now = now.Add(2 * time.Second)
	w.notify("p/c")                          // after its end: an expiry announced (etcd)
	step(time.Second, "expired p/c token=5") // so it expired
	step(time.Second, "granted p/d token=6", h("p/d", 6, time.Second))
	step(time.Second, "expired p/d token=6") // gone exactly at its end
	// A name with several holders (WithLimit): an event per holding.
	step(time.Second, "granted p/s token=7, granted p/s token=10", h("p/s", 10, 5*time.Second), h("p/s", 7, 5*time.Second))
	step(time.Second, "", h("p/s", 7, 5*time.Second), h("p/s", 10, 5*time.Second)) // another order: nothing
	step(time.Second, "released p/s token=7, granted p/s token=11", h("p/s", 10, 4*time.Second), h("p/s", 11, 5*time.Second))
}
