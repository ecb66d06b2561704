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
func (b *Backend) call(ctx context.Context, names []string, fn func(context.Context) error) error {
	var err error
	if terr := b.trips.Do(ctx, names, func(ctx context.Context) { err = fn(ctx) }); terr != nil {
		return terr // fn may still be running: err is not ours to read
	}
	return err
}
