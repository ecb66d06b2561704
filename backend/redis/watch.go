package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
)

// Reconnection backoff of the watches: quick first, capped so that a long
// outage costs one attempt every few seconds.
const (
	watchRetryMin = 50 * time.Millisecond
	watchRetryMax = 2 * time.Second
)

// WatchReleases (Info says AnnouncesReleases): one subscription to the
// release channel, calling fn with the key of every release by any process
// that uses the same prefix. It resubscribes by itself after a failure (with a
// capped backoff; releases made meanwhile are missed), checks an idle
// connection with PING so that a silently dead one is noticed, and returns nil
// when ctx ends or the backend is closed, leaving no goroutine behind. With
// notifications off it returns ErrNotificationsDisabled at once.
func (b *Backend) WatchReleases(ctx context.Context, fn func(key string)) error {
	return b.watch(ctx, "release", b.Channel(), fn, b.cfg.onSubscribed)
}

// WatchHandOffs (Info says HandOffNotices): one subscription to the
// channel of the address addr (HandOffChannel), calling fn with every
// hand-off a release or revoke by any process of the same prefix sent there,
// and ready (when not nil) each time the subscription is confirmed, the first
// time and after every reconnection. Like WatchReleases it resubscribes by
// itself (hand-offs sent meanwhile are missed: the waiter's poll picks the
// grant up), checks an idle connection with PING, and returns nil when ctx
// ends or the backend is closed. It returns an error wrapping
// backend.ErrInvalidRequest for an address that QueueRequest.Notify could not
// be, and ErrNotificationsDisabled with notifications off. A message that is
// not a hand-off is logged and dropped.
func (b *Backend) WatchHandOffs(ctx context.Context, addr string, fn func(backend.HandOff), ready func()) error {
	if !validAddress(addr) {
		return fmt.Errorf("%w: hand-off address %q is not 1 to %d bytes of printable ASCII without spaces",
			backend.ErrInvalidRequest, addr, backend.MaxAddressBytes)
	}
	return b.watch(ctx, "hand-off", b.HandOffChannel(addr), func(msg string) {
		h, err := parseHandOff(msg)
		if err != nil {
			b.cfg.logger.WarnContext(ctx, "redis: dropped a message on a hand-off channel", "address", addr, "error", err)
			return
		}
		fn(h)
	}, ready)
}

// watch subscribes to channel and calls fn with every message until ctx ends
// or the backend closes, resubscribing after failures; ready is called each
// time the subscription is confirmed. what names the watch in logs.
func (b *Backend) watch(ctx context.Context, what, channel string, fn func(string), ready func()) error {
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
		subscribed, err := b.watchOnce(ctx, channel, fn, ready)
		if ctx.Err() != nil {
			break
		}
		if subscribed {
			retry = watchRetryMin
		}
		// On Cluster the subscription goes to the master of the channel's
		// slot as the client's slot map says: a dead one stays there until
		// the map is reloaded, which go-redis does on its own only every
		// minute.
		b.reloadAfter(ctx, err)
		b.cfg.logger.WarnContext(ctx, "redis: "+what+" watch interrupted, resubscribing",
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
func (b *Backend) watchOnce(ctx context.Context, channel string, fn func(string), ready func()) (subscribed bool, _ error) {
	ps := b.client.Subscribe(ctx)
	// Subscribing dials and holds the subscription's lock, which Close needs,
	// until the server answers: when ctx ends first the watch returns, and
	// the subscription is closed once the dial gives up.
	var err error
	if terr := b.roundTrip(ctx, nil, func(ctx context.Context) { err = ps.Subscribe(ctx, channel) }); terr != nil {
		go func() { _ = ps.Close() }()
		return false, terr
	}
	// A blocked read ignores ctx: closing the subscription is what ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		if stop() {
			_ = ps.Close()
		}
	}()
	if err != nil {
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
				if ready != nil {
					ready()
				}
			}
		}
	}
}

// validAddress reports whether addr could be a QueueRequest.Notify other
// than "": what the hand-offs could be sent to.
func validAddress(addr string) bool {
	if addr == "" || len(addr) > backend.MaxAddressBytes {
		return false
	}
	for i := 0; i < len(addr); i++ {
		if c := addr[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}
