package sqlserver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// Release deletes the row of (r.Key, r.Owner, r.Token); token 0 deletes
// r.Owner's row whatever its token. It returns nil when nothing matched: a
// stale or foreign owner never deletes someone else's row.
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
		deleted, err = b.releaseOnce(ctx, r.Key, r.Owner, token)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "release failed", err, "key", r.Key, "owner", r.Owner, "token", r.Token)
		return fmt.Errorf("sqlserver: release %q: %w", r.Key, err)
	}
	b.log.DebugContext(ctx, "released", "key", r.Key, "owner", r.Owner, "token", r.Token, "deleted", deleted)
	return nil
}

func (b *Backend) releaseOnce(ctx context.Context, key, owner string, token int64) (int64, error) {
	var deleted int64
	err := b.db.QueryRowContext(ctx, b.q.release,
		sql.Named("name", key),
		sql.Named("owner", owner),
		sql.Named("token", token),
	).Scan(&deleted)
	return deleted, err
}
