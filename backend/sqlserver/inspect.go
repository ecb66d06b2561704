package sqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/backend"
)

// Inspect returns the live holding of key, whoever holds it (of a name with
// several holders, the one that ends first); held is false when the key is
// free or its holding has expired (on the server's clock).
// It changes nothing, so transient errors are retried.
func (b *Backend) Inspect(ctx context.Context, key string) (h backend.Holder, held bool, err error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	err = b.retry(ctx, "inspect", []string{key}, func(ctx context.Context) error {
		rows, err := b.db.QueryContext(ctx, b.q.inspect, sql.Named("name", key))
		if err != nil {
			return err
		}
		h, held, err = scanOneHolding(rows, key)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "inspect failed", err, "key", key)
		return backend.Holder{}, false, fmt.Errorf("sqlserver: inspect %q: %w", key, err)
	}
	return h, held, nil
}

// List calls fn with every live holding whose key starts with prefix ("" for
// all), in key order (binary), until fn returns false. It reads the table in
// one query, so a failure after fn was called is returned, not retried.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	switch {
	case !utf8.ValidString(prefix):
		return fmt.Errorf("%w: prefix is not valid UTF-8", backend.ErrInvalidRequest)
	case strings.IndexByte(prefix, 0) >= 0:
		return fmt.Errorf("%w: prefix contains a NUL byte", backend.ErrInvalidRequest)
	case utf16Len(prefix) > 2*backend.MaxKeyRunes:
		// Longer than any key: nothing can match.
		return ctx.Err()
	}
	var hs []backend.Holder
	err := b.retry(ctx, "list", nil, func(ctx context.Context) error {
		var err error
		hs, err = b.listOnce(ctx, prefix)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "list failed", err, "prefix", prefix)
		return fmt.Errorf("sqlserver: list %q: %w", prefix, err)
	}
	for _, h := range hs {
		if !fn(h) {
			return nil
		}
	}
	return nil
}

// listOnce reads every live holding whose key starts with prefix. It reads
// them all before List calls fn, so that fn runs on the caller's goroutine
// and never after the caller's context ended.
func (b *Backend) listOnce(ctx context.Context, prefix string) ([]backend.Holder, error) {
	rows, err := b.db.QueryContext(ctx, b.q.list, sql.Named("prefix", prefix))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hs []backend.Holder
	for rows.Next() {
		var key string
		h, err := scanHolding(rows, &key)
		if err != nil {
			return nil, err
		}
		h.Key = key
		if !strings.HasPrefix(key, prefix) {
			return nil, fmt.Errorf("the server returned key %q, which lacks the prefix", key)
		}
		hs = append(hs, h)
	}
	return hs, rows.Err()
}

// Revoke ends the live holding of key when its token is token (0: whichever
// holding is live) and returns what it removed. The holder is fenced: its
// next renewal fails with ErrNotHeld, and its token is never issued again.
// Like a release, it hands the key on to the head of its waiter queue in the
// same transaction (backend/queue.go); there are no notifications: the new
// holder finds its holding when it next polls. Revoke is retried only when
// it was chosen as a deadlock victim, whose transaction is rolled back
// whole: after an ambiguous failure a second run could report a removal it
// did not make, or (token 0) remove a holding granted in between that the
// operator never saw; Inspect tells what stands.
func (b *Backend) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	t, ok := tokenParam(token)
	if !ok {
		return backend.Holder{}, false, nil // never issued, so not live
	}
	var (
		h       backend.Holder
		removed bool
	)
	err := b.retryWhen(ctx, "revoke", []string{key}, isRolledBack, func(ctx context.Context) error {
		rows, err := b.db.QueryContext(ctx, b.q.revoke, sql.Named("name", key), sql.Named("token", t))
		if err != nil {
			return err
		}
		h, removed, err = scanOneHolding(rows, key)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "revoke failed", err, "key", key, "token", token)
		return backend.Holder{}, false, fmt.Errorf("sqlserver: revoke %q: %w", key, err)
	}
	if removed && token != 0 && h.Token != token {
		return backend.Holder{}, false, fmt.Errorf("sqlserver: revoke %q: removed token %d, asked for %d", key, h.Token, token)
	}
	if removed {
		b.log.InfoContext(ctx, "revoked", "key", key, "owner", h.Owner, "token", h.Token)
	}
	return h, removed, nil
}

// scanOneHolding reads at most one holding of key and closes rows.
func scanOneHolding(rows *sql.Rows, key string) (backend.Holder, bool, error) {
	defer rows.Close()
	if !rows.Next() {
		return backend.Holder{}, false, rows.Err()
	}
	h, err := scanHolding(rows)
	if err != nil {
		return backend.Holder{}, false, err
	}
	h.Key = key
	if rows.Next() {
		return backend.Holder{}, false, fmt.Errorf("sqlserver: more than one holding of %q", key)
	}
	if err := rows.Err(); err != nil {
		return backend.Holder{}, false, err
	}
	return h, true, nil
}

// scanHolding reads one row of (extra..., owner, token, expiry, remaining
// microseconds, metadata, limit) and checks that it is a live holding.
func scanHolding(rows *sql.Rows, extra ...any) (backend.Holder, error) {
	var (
		h       backend.Holder
		token   int64
		expires time.Time
		remUs   int64
		limit   int64
	)
	if err := rows.Scan(append(extra, &h.Owner, &token, &expires, &remUs, &h.Metadata, &limit)...); err != nil {
		return backend.Holder{}, fmt.Errorf("sqlserver: scanning a holding: %w", err)
	}
	if token <= 0 || remUs <= 0 || limit < 1 || limit > backend.MaxLimit {
		return backend.Holder{}, fmt.Errorf("sqlserver: malformed holding (token %d, %d µs left, limit %d)", token, remUs, limit)
	}
	h.Limit = int(limit)
	h.Token = uint64(token)
	h.ExpiresAt = expires.UTC()
	h.ExpiresIn = time.Duration(min(remUs, int64(backend.MaxTTL/time.Microsecond))) * time.Microsecond
	return h, nil
}
