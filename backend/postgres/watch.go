package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// WatchReleases calls fn with the lease name of every release of this table,
// by any owner in any process, until ctx ends; then it returns nil. It holds
// one connection taken out of the pool (hijacked: it no longer counts against
// the pool) on which it LISTENs. When that connection fails it reconnects by
// itself with capped, jittered backoff; releases made while it was down are
// not replayed (waiters also wake at the holder's expiry). fn runs on the
// watch's goroutine and must not block. Each call is an independent watch:
// the engine keeps one per Manager.
func (b *Backend) WatchReleases(ctx context.Context, fn func(key string)) error {
	failures := 0
	for {
		listened, err := b.listen(ctx, fn)
		if ctx.Err() != nil {
			return nil
		}
		if listened {
			failures = 0
		}
		failures++
		wait := b.backoff(failures)
		b.log.WarnContext(ctx, "leasehold postgres: release watch interrupted; reconnecting",
			"channel", b.channel, "err", err, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// listen runs one LISTEN connection until it fails or ctx ends. listened
// reports whether the LISTEN itself succeeded.
func (b *Backend) listen(ctx context.Context, fn func(key string)) (listened bool, err error) {
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	conn := pc.Hijack()
	defer func() {
		// The conn may be in any state (cancelled mid-read): closing it with
		// a short deadline never hangs the caller.
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.channel}.Sanitize()); err != nil {
		return false, err
	}
	if b.onListen != nil {
		b.onListen()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		fn(n.Payload)
	}
}
