package sqlserver

import "context"

// call runs fn, the queries of one call on names and the reading of their
// rows, so that the call ends with ctx: go-mssqldb's login reads without its
// context (bounded only by the DSN's "connection timeout", by default
// unbounded), and a cancelled query waits for the server to confirm the
// cancellation (up to seconds). Both go on in the background once the
// caller has returned ctx's error; a later call on one of names waits for
// them first, so that the server runs the calls on a name in the order they
// were made (roundtrip.Runner).
//
// An error saying a table does not exist is wrapped with ErrSchemaMissing.
//
// fn runs only once it holds one of the backend's call slots (maxCalls), and
// keeps it until it returns, abandoned or not: each call in flight holds a
// connection, and an unlimited pool would otherwise open one per call.
func (b *Backend) call(ctx context.Context, names []string, fn func(context.Context) error) error {
	var err error
	if terr := b.trips.Do(ctx, names, func(ctx context.Context) {
		if err = b.takeSlot(ctx); err != nil {
			return
		}
		defer b.freeSlot()
		err = schemaMissing(fn(ctx))
	}); terr != nil {
		return terr // fn may still be running: err is not ours to read
	}
	return err
}

// takeSlot waits for a free call slot, or for ctx to end.
func (b *Backend) takeSlot(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// freeSlot gives back the slot of takeSlot.
func (b *Backend) freeSlot() { <-b.slots }

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
