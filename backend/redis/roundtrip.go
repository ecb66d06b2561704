package redis

import "context"

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
