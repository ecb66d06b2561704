package redis

import (
	"context"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/roundtrip"
)

// Every call ends with its context: go-redis ignores the cancellation of a
// command's context (only a deadline reaches the socket, and only with
// ContextTimeoutEnabled), so each call's round trips run through the
// backend's roundtrip.Runner. When the context ends first the call returns
// the context's error at once, and the command already sent holds its
// connection until the client's own bound ends the read (the context's
// deadline with ContextTimeoutEnabled, else ReadTimeout); go-redis then
// closes that connection rather than reuse it, since its reply may still
// arrive.

// roundTrip runs fn, the round trips of one call on names, through the
// backend's Runner (roundtrip.Runner.Do).
func (b *Backend) roundTrip(ctx context.Context, names []string, fn func(ctx context.Context)) error {
	return b.trips.Do(ctx, names, fn)
}

// roundTripCall is roundTrip with c.Run as fn (roundtrip.Runner.DoCall).
func (b *Backend) roundTripCall(ctx context.Context, names []string, c roundtrip.Call) error {
	return b.trips.DoCall(ctx, names, c)
}

// The single calls as roundtrip.Calls: each is one allocation, where a
// closure writing the results it captured was one per result more.
type (
	acquireTrip struct {
		b     *Backend
		r     backend.AcquireRequest
		names [1]string
		g     backend.Grant
		err   error
	}
	renewTrip struct {
		b     *Backend
		r     backend.RenewRequest
		names [1]string
		g     backend.Grant
		err   error
	}
	releaseTrip struct {
		b     *Backend
		r     backend.ReleaseRequest
		names [1]string
		err   error
	}
)

func (t *acquireTrip) Run(ctx context.Context) { t.g, t.err = t.b.acquire(ctx, t.r) }
func (t *renewTrip) Run(ctx context.Context)   { t.g, t.err = t.b.renew(ctx, t.r) }
func (t *releaseTrip) Run(ctx context.Context) { t.err = t.b.release(ctx, t.r) }
