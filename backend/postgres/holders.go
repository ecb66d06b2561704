package postgres

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// Holders returns every live holding of key, in token order: the exclusive
// holding, or each holding of a name with several holders (each with the
// name's limit). A key that breaks the limits gives an error wrapping
// backend.ErrInvalidRequest; faults are retried and returned wrapped.
func (b *Backend) Holders(ctx context.Context, key string) ([]backend.Holder, error) {
	if err := backend.CheckText("key", key); err != nil {
		return nil, err
	}
	var out []backend.Holder
	err := b.retry(ctx, "holders", func(ctx context.Context) error {
		out = out[:0]
		rows, err := b.pool.Query(ctx, b.q.holders, key)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			h, err := scanHolding(rows)
			if err != nil {
				return err
			}
			out = append(out, h)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: holders %q: %w", key, err)
	}
	return out, nil
}
