package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Watch events.
const (
	evHeld     = "held"     // live when the watch started
	evGranted  = "granted"  // a new holding: a new key, or a new token for a key
	evReleased = "released" // gone before its expiry: released, or revoked by force
	evExpired  = "expired"  // gone at or after the expiry last seen: its holder did not renew
)

func watchCommand() *command {
	c := &command{name: "watch", args: "[-prefix P] [-interval D] [-for D]",
		summary: "Stream the grants, releases and expiries of names starting with P, one line each\n" +
			"  (JSON lines with -json): time, event (held, granted, released, expired), name, owner, token.\n" +
			"  It lists the store every -interval and wakes at once on the store's release notifications\n" +
			"  (etcd: every release; Redis, PostgreSQL: releases of names someone waits for). A lease\n" +
			"  granted and ended between two looks is not seen. \"released\"\n" +
			"  means gone before its expiry (released or revoked), \"expired\" gone at or after it.\n" +
			"  Stops on SIGINT or SIGTERM, or after -for, with exit code 0."}
	var interval, limit *time.Duration
	c.flags = func(fs *flag.FlagSet) func(context.Context, *app, *store, *opts) int {
		prefix := fs.String("prefix", "", "watch only names starting with `P`")
		interval = fs.Duration("interval", time.Second, "how often to list the store")
		limit = fs.Duration("for", 0, "stop after this `duration` (0: until SIGINT or SIGTERM)")
		return func(ctx context.Context, a *app, s *store, o *opts) int {
			if *limit > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, *limit)
				defer cancel()
			}
			w := &watcher{
				out: a.stdout, errOut: a.stderr, redact: s.redact, o: o,
				list: s.b, prefix: o.keyPrefix + *prefix, interval: *interval,
				now: time.Now, wake: make(chan struct{}, 1),
			}
			notifies := s.b.Info().AnnouncesReleases
			if notifies {
				wctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					_ = s.b.WatchReleases(wctx, w.notify)
				}()
				defer func() { cancel(); <-done }()
			}
			return w.run(ctx, s.desc, notifies)
		}
	}
	c.check = func() error {
		switch {
		case *interval <= 0:
			return usagef("-interval must be positive, got %v", *interval)
		case *limit < 0:
			return usagef("-for must not be negative, got %v", *limit)
		}
		return nil
	}
	return c
}

// seen is a holding as one look at the store found it.
type seen struct {
	h backend.Holder
	// at is when the look began (local monotonic clock): the store measured
	// h.ExpiresIn after it, so at+ExpiresIn is never later than the expiry.
	at time.Time
}

// watcher diffs successive looks at the store.
type watcher struct {
	out, errOut io.Writer
	redact      func(string) string
	o           *opts
	list        lister
	prefix      string // store key prefix
	interval    time.Duration
	now         func() time.Time

	wake chan struct{}
	mu   sync.Mutex
	// announced holds when each key was first announced deleted since the
	// last look: a tighter bound on when it went than the next look. The
	// announcement alone does not say why (etcd announces expiries too).
	announced map[string]time.Time

	last map[string]seen
}

// notify is the release watch's callback: it must not block.
func (w *watcher) notify(key string) {
	if !strings.HasPrefix(key, w.prefix) {
		return
	}
	now := w.now()
	w.mu.Lock()
	if w.announced == nil {
		w.announced = map[string]time.Time{}
	}
	if _, ok := w.announced[key]; !ok {
		w.announced[key] = now
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// fail reports the first look's error: without it there is nothing to watch.
func (w *watcher) fail(err error) int {
	msg := err.Error()
	if missingTable(err) {
		msg += "\n(no lease table there: check -schema and -table, or create it with the backend's EnsureSchema)"
	}
	fmt.Fprintf(w.errOut, "leasehold watch: %s\n", w.redact(msg))
	return exitFailure
}

func (w *watcher) run(ctx context.Context, desc string, notifies bool) int {
	first, err := w.look(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		return w.fail(err)
	}
	w.last = first
	for _, k := range sortedKeys(first) {
		w.emit(evHeld, first[k].h)
	}
	how := "polling only"
	if notifies {
		how = "and on release notifications"
	}
	fmt.Fprintf(w.errOut, "leasehold watch: watching names starting with %q on %s (every %v, %s)\n",
		oneLine(strings.TrimPrefix(w.prefix, w.o.keyPrefix)), desc, w.interval, how)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		case <-w.wake:
		}
		w.poll(ctx)
	}
}

// look lists the live holdings under the prefix.
func (w *watcher) look(ctx context.Context) (map[string]seen, error) {
	at := w.now()
	hs, err := listAll(ctx, w.list, w.o, w.prefix)
	if err != nil {
		return nil, err
	}
	m := make(map[string]seen, len(hs))
	for _, h := range hs {
		m[holdingKey(h)] = seen{h: h, at: at}
	}
	return m, nil
}

// holdingKey names one holding among the looks: its key and its token
// (a name acquired WithLimit has several holdings at once), so that the
// keys sort by name, then by token. Names hold no NUL.
func holdingKey(h backend.Holder) string {
	return fmt.Sprintf("%s\x00%020d", h.Key, h.Token)
}

// poll takes one look and emits what changed since the last: the ends first,
// then the grants, each in key order (then token order: a name with several
// holders has an event per holding). A holding gone before the expiry last
// seen was released (or revoked); one gone at or after it expired. A
// holding renewed since the last look and released after the expiry seen
// then is called expired: looks at an interval shorter than the TTLs make
// that rare.
func (w *watcher) poll(ctx context.Context) {
	cur, err := w.look(ctx)
	if err != nil {
		if ctx.Err() == nil {
			// Keep watching: the store may be back at the next look.
			fmt.Fprintf(w.errOut, "leasehold watch: %s (trying again in %v)\n", w.redact(err.Error()), w.interval)
		}
		return
	}
	done := w.now() // the holdings missing from cur were gone by then
	w.mu.Lock()
	announced := w.announced
	w.announced = nil
	w.mu.Unlock()
	for _, k := range sortedKeys(w.last) {
		p := w.last[k]
		if c, ok := cur[k]; ok && c.h.Token == p.h.Token {
			continue
		}
		// It went before gone (the notification, else this look ended);
		// before p's expiry as last seen (at is before the store measured
		// ExpiresIn, so this estimate is never late), it cannot have expired.
		gone := done
		if n, ok := announced[p.h.Key]; ok && n.Before(gone) {
			gone = n
		}
		ev := evExpired
		if gone.Before(p.at.Add(p.h.ExpiresIn)) {
			ev = evReleased
		}
		w.emit(ev, p.h)
	}
	for _, k := range sortedKeys(cur) {
		c := cur[k]
		if p, ok := w.last[k]; !ok || p.h.Token != c.h.Token {
			w.emit(evGranted, c.h)
		}
	}
	w.last = cur
}

// eventJSON is one line of watch -json. Field names are stable.
type eventJSON struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"`
	Name  string    `json:"name"`
	Key   string    `json:"key"`
	Owner string    `json:"owner"`
	Token uint64    `json:"token"`
	// ExpiresInMS is the time left when last seen, as the store measured it.
	ExpiresInMS int64  `json:"expires_in_ms"`
	Metadata    string `json:"metadata"`
}

func (w *watcher) emit(event string, h backend.Holder) {
	now := w.now().UTC()
	name := strings.TrimPrefix(h.Key, w.o.keyPrefix)
	var err error
	if w.o.json {
		err = writeJSON(w.out, eventJSON{Time: now, Event: event, Name: name, Key: h.Key, Owner: h.Owner, Token: h.Token,
			ExpiresInMS: h.ExpiresIn.Milliseconds(), Metadata: h.Metadata})
	} else {
		_, err = fmt.Fprintf(w.out, "%s %-8s %s owner=%s token=%d\n",
			now.Format("2006-01-02T15:04:05.000Z07:00"), event, oneLine(name), oneLine(h.Owner), h.Token)
	}
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		fmt.Fprintf(w.errOut, "leasehold watch: %v\n", err)
	}
}

func sortedKeys(m map[string]seen) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
