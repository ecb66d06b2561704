package sqlserver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// Holders returns every live holding of key, by token: its exclusive
// holding (Limit 1), or each holding of a name with several holders (Limit
// the name's). It changes nothing, so transient errors are retried.
func (b *Backend) Holders(ctx context.Context, key string) ([]backend.Holder, error) {
	if err := backend.CheckText("key", key); err != nil {
		return nil, err
	}
	var hs []backend.Holder
	err := b.retry(ctx, "holders", []string{key}, func(ctx context.Context) error {
		rows, err := b.db.QueryContext(ctx, b.q.holders, sql.Named("name", key))
		if err != nil {
			return err
		}
		defer rows.Close()
		hs = hs[:0]
		for rows.Next() {
			h, err := scanHolding(rows)
			if err != nil {
				return err
			}
			h.Key = key
			hs = append(hs, h)
		}
		return rows.Err()
	})
	if err != nil {
		b.logFailure(ctx, "holders failed", err, "key", key)
		return nil, fmt.Errorf("sqlserver: holders %q: %w", key, err)
	}
	return hs, nil
}
