package redis

import (
	"context"
	"errors"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Reconnection backoff of the release watch: quick first, capped so that a
// long outage costs one attempt every few seconds.
const (
	watchRetryMin = 50 * time.Millisecond
	watchRetryMax = 2 * time.Second
)

// WatchReleases implements backend.ReleaseWatcher: one subscription to the
// release channel, calling fn with the key of every release by any process
// that uses the same prefix. It resubscribes by itself after a failure (with a
// capped backoff; releases made meanwhile are missed), checks an idle
// connection with PING so that a silently dead one is noticed, and returns nil
// when ctx ends or the backend is closed, leaving no goroutine behind. With
// notifications off it returns ErrNotificationsDisabled at once.
func (b *Backend) WatchReleases(ctx context.Context, fn func(key string)) error {
	if !b.cfg.notify {
		return ErrNotificationsDisabled
	}
	if err := b.closed(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.closing, cancel)
	defer stop()

	retry := watchRetryMin
	for ctx.Err() == nil {
		subscribed, err := b.watchOnce(ctx, fn)
		if ctx.Err() != nil {
			break
		}
		if subscribed {
			retry = watchRetryMin
		}
		b.cfg.logger.WarnContext(ctx, "redis: release watch interrupted, resubscribing",
			"error", err, "retry_in", retry)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		retry = min(2*retry, watchRetryMax)
	}
	return nil
}

// watchOnce subscribes and forwards messages until the connection fails or
// ctx ends. It reports whether the subscription was confirmed, so that a
// watch that worked for a while starts its backoff afresh.
func (b *Backend) watchOnce(ctx context.Context, fn func(key string)) (subscribed bool, err error) {
	ps := b.client.Subscribe(ctx)
	// A blocked read ignores ctx: closing the subscription is what ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		if stop() {
			_ = ps.Close()
		}
	}()
	if err := ps.Subscribe(ctx, b.Channel()); err != nil {
		return false, err
	}
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, b.cfg.watchIdle)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && ctx.Err() == nil {
				// Quiet is normal; a PING with no answer by the next timeout
				// means the connection is dead.
				if err := ps.Ping(ctx); err != nil {
					return subscribed, err
				}
				pinged = true
				continue
			}
			return subscribed, err
		}
		pinged = false
		switch m := msg.(type) {
		case *goredis.Message:
			fn(m.Payload)
		case *goredis.Subscription:
			if m.Kind == "subscribe" && !subscribed {
				subscribed = true
				if b.cfg.onSubscribed != nil {
					b.cfg.onSubscribed()
				}
			}
		}
	}
}
