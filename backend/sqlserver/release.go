package sqlserver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// Release deletes the row of the holding (r.Key, r.Owner, r.Attempt,
// r.Token); token 0 deletes that attempt's row whatever its token, never
// another attempt's (not even the same owner's). It returns nil when nothing
// matched: a stale request never deletes a newer holding.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	token, ok := tokenParam(r.Token)
	if !ok {
		return nil // never issued, so nothing to release
	}
	var deleted int64
	err := b.retry(ctx, "release", func(ctx context.Context) error {
		var err error
		deleted, err = b.releaseOnce(ctx, r, token)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "release failed", err, "key", r.Key, "owner", r.Owner, "attempt", r.Attempt, "token", r.Token)
		return fmt.Errorf("sqlserver: release %q: %w", r.Key, err)
	}
	b.log.DebugContext(ctx, "released", "key", r.Key, "owner", r.Owner, "attempt", r.Attempt, "token", r.Token, "deleted", deleted)
	return nil
}

func (b *Backend) releaseOnce(ctx context.Context, r backend.ReleaseRequest, token int64) (int64, error) {
	var deleted int64
	err := b.db.QueryRowContext(ctx, b.q.release, releaseArgs(r, token)...).Scan(&deleted)
	return deleted, err
}

func releaseArgs(r backend.ReleaseRequest, token int64) []any {
	return []any{
		sql.Named("name", r.Key),
		sql.Named("owner", r.Owner),
		sql.Named("attempt", r.Attempt),
		sql.Named("token", token),
	}
}
