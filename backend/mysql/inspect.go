package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// Inspect returns the live holding of key that ends first.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	var hs []backend.Holder
	err := b.retry(ctx, "inspect", []string{key}, func(ctx context.Context) error {
		var err error
		hs, err = b.read(ctx, b.q.inspect, false, key)
		return err
	})
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("mysql: inspect %q: %w", key, err)
	}
	if len(hs) == 0 {
		return backend.Holder{}, false, nil
	}
	hs[0].Key = key
	return hs[0], true, nil
}

// Holders returns every live holding of key, in token order.
func (b *Backend) Holders(ctx context.Context, key string) ([]backend.Holder, error) {
	if err := backend.CheckText("key", key); err != nil {
		return nil, err
	}
	var hs []backend.Holder
	err := b.retry(ctx, "holders", []string{key}, func(ctx context.Context) error {
		var err error
		hs, err = b.read(ctx, b.q.holders, false, key)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: holders %q: %w", key, err)
	}
	for i := range hs {
		hs[i].Key = key
	}
	return hs, nil
}

// List calls fn with every live holding whose name starts with prefix (as
// bytes), in name and token order.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	var hs []backend.Holder
	err := b.retry(ctx, "list", nil, func(ctx context.Context) error {
		var err error
		hs, err = b.read(ctx, b.q.list, true, prefix, prefix, prefix)
		return err
	})
	if err != nil {
		return fmt.Errorf("mysql: list %q: %w", prefix, err)
	}
	for _, h := range hs {
		if !fn(h) {
			break
		}
	}
	return nil
}

// read runs one of the holding queries (withName: its rows start with the
// name).
func (b *Backend) read(ctx context.Context, query string, withName bool, args ...any) ([]backend.Holder, error) {
	rows, err := b.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hs []backend.Holder
	for rows.Next() {
		var (
			h            backend.Holder
			expires, now int64
			dest         = []any{&h.Owner, &h.Token, &expires, &h.Metadata, &h.Limit, &now}
		)
		if withName {
			dest = append([]any{&h.Key}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		h.ExpiresAt, h.ExpiresIn = toTime(expires), until(expires, now)
		hs = append(hs, h)
	}
	return hs, rows.Err()
}
