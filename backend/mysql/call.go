package mysql

import "context"

// call runs fn, the statements of one call on names and the reading of
// their rows, so that the call ends with ctx even while the driver still
// waits on the network; abandoned work finishes in the background, and a
// later call on one of names waits for it first (roundtrip.Runner), so that
// the server sees the calls on a name in the order they were made.
//
// fn runs only once it holds one of the backend's call slots, and keeps it
// until it returns: each call in flight holds a connection, and an
// unlimited pool would otherwise open one per call.
func (b *Backend) call(ctx context.Context, names []string, fn func(context.Context) error) error {
	var err error
	if terr := b.trips.Do(ctx, names, func(ctx context.Context) {
		select {
		case b.slots <- struct{}{}:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		defer func() { <-b.slots }()
		err = fn(ctx)
	}); terr != nil {
		return terr // fn may still be running: err is not ours to read
	}
	return err
}

// callBound is how many calls the backend runs at once on a pool of at most
// poolMax connections (0: unlimited): maxCalls when set (WithMaxCalls), else
// DefaultMaxCalls, and never more than a limited pool can serve at once.
func callBound(poolMax, maxCalls int) int {
	n := maxCalls
	if n == 0 {
		n = DefaultMaxCalls
	}
	if poolMax > 0 {
		n = min(n, poolMax)
	}
	return n
}
