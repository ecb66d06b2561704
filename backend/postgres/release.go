package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/leasehold/leasehold/backend"
)

// Release deletes the holding of (r.Key, r.Owner, r.Token), or with Token 0
// whatever r.Owner holds under r.Key, and announces it on Channel so that
// waiters wake at once. Nothing matching is not an error. Faults are retried
// and returned wrapped; a retry after an ambiguous failure is harmless.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Token > math.MaxInt64 {
		return nil // no holding can have this token
	}
	err := b.retry(ctx, "release", func(ctx context.Context) error {
		_, err := b.pool.Exec(ctx, b.q.release, r.Key, r.Owner, int64(r.Token), b.channel)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: release %q: %w", r.Key, err)
	}
	return nil
}
