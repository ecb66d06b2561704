package backend

import "context"

// ReleaseWatcher is implemented by backends that can announce releases (Redis
// pub/sub, PostgreSQL LISTEN/NOTIFY), so that waiters wake at once instead of
// polling. The engine keeps one watch per Manager.
type ReleaseWatcher interface {
	// WatchReleases calls fn with the key of every release made through the
	// store, by any owner in any process, until ctx ends. It reconnects by
	// itself after failures (a notification may be lost meanwhile; waiters
	// also wake at the holder's expiry) and returns when ctx ends. fn must not
	// block.
	WatchReleases(ctx context.Context, fn func(key string)) error
}

// BatchRenewer is implemented by backends that can renew many holdings in one
// round trip.
type BatchRenewer interface {
	// RenewBatch renews every request and returns one result per request, in
	// order. A non-nil error means the batch as a whole could not be confirmed;
	// the engine then treats each lease as an unconfirmed renewal.
	RenewBatch(ctx context.Context, rs []RenewRequest) ([]RenewResult, error)
}

// RenewResult is the outcome of one renewal in a batch: a Grant, or an error
// wrapping ErrNotHeld.
type RenewResult struct {
	Grant Grant
	Err   error
}

// Immediate is implemented by backends whose calls never wait on I/O (the
// memory backend). The engine calls them inline instead of on a goroutine.
type Immediate interface {
	Immediate()
}
