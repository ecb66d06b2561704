package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

var (
	_ backend.Inspector = (*Backend)(nil)
	_ backend.Lister    = (*Backend)(nil)
	_ backend.Revoker   = (*Backend)(nil)
)

// defaultListPage is how many holdings List reads per statement: no
// connection is held while fn runs, and each page is a short read.
const defaultListPage = 500

// holdingColumns reads a live holding, with the time it has left measured
// on the statement's clock c.now.
const holdingColumns = `l.lease_name, l.owner_instance_id, l.fencing_token, l.expires_at, l.metadata,
       GREATEST(0, extract(epoch FROM l.expires_at - c.now) * 1000000)::bigint`

func scanHolding(row pgx.Row) (backend.Holding, error) {
	var (
		h         backend.Holding
		token     int64
		remaining int64
	)
	if err := row.Scan(&h.Key, &h.Owner, &token, &h.ExpiresAt, &h.Metadata, &remaining); err != nil {
		return backend.Holding{}, err
	}
	h.Token, h.ExpiresIn = uint64(token), time.Duration(remaining)*time.Microsecond
	return h, nil
}

// Inspect returns the live holding of key (held is false when the key is
// free, released or expired by the server's clock). A key that breaks the
// limits gives an error wrapping backend.ErrInvalidRequest; faults are
// retried and returned wrapped.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Holding, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holding{}, false, err
	}
	var h backend.Holding
	err := b.retry(ctx, "inspect", func(ctx context.Context) error {
		var err error
		h, err = scanHolding(b.pool.QueryRow(ctx, b.q.inspect, key))
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return backend.Holding{}, false, nil
	case err != nil:
		return backend.Holding{}, false, fmt.Errorf("postgres: inspect %q: %w", key, err)
	}
	return h, true, nil
}

// List calls fn with every live holding whose key starts with prefix ("" for
// all), in byte order of the keys, until fn returns false. It reads pages of
// holdings by primary-key range (plain reads: nothing is locked, writers are
// never blocked) and holds no connection while fn runs, so a holding granted,
// released or expired meanwhile may or may not be seen. A prefix that is not
// valid UTF-8 or contains a NUL byte gives an error wrapping
// backend.ErrInvalidRequest.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Holding) bool) error {
	if !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 {
		return fmt.Errorf("%w: prefix is not valid UTF-8 or contains a NUL byte", backend.ErrInvalidRequest)
	}
	upper, bounded := prefixEnd(prefix)
	var after *string // the last key of the previous page
	for {
		var page []backend.Holding
		err := b.retry(ctx, "list", func(ctx context.Context) error {
			page = page[:0]
			rows, err := b.pool.Query(ctx, b.q.list, prefix, upper, bounded, after, b.listPage)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				h, err := scanHolding(rows)
				if err != nil {
					return err
				}
				page = append(page, h)
			}
			return rows.Err()
		})
		if err != nil {
			return fmt.Errorf("postgres: list %q: %w", prefix, err)
		}
		for _, h := range page {
			if !fn(h) {
				return nil
			}
		}
		if len(page) < b.listPage {
			return nil
		}
		last := page[len(page)-1].Key
		after = &last
	}
}

// prefixEnd returns the least string above every string that starts with
// prefix, in byte order: prefix with its last code point incremented, after
// dropping trailing U+10FFFF (which has no successor). UTF-8 preserves code
// point order under byte comparison, so [prefix, end) is exactly the keys
// starting with prefix. bounded is false when there is no such string (an
// empty prefix, or one made only of U+10FFFF).
func prefixEnd(prefix string) (end string, bounded bool) {
	rs := []rune(prefix)
	for len(rs) > 0 {
		last := rs[len(rs)-1]
		switch {
		case last == utf8.MaxRune:
			rs = rs[:len(rs)-1]
			continue
		case last == 0xD7FF: // the next code point is past the surrogates
			rs[len(rs)-1] = 0xE000
		default:
			rs[len(rs)-1] = last + 1
		}
		return string(rs), true
	}
	return "", false
}

// Revoke ends the live holding of key by force when its token is token (0:
// whichever holding is live), and returns it. The holder is fenced: its next
// renewal or release names a holding that no longer exists (ErrNotHeld), and
// the sequence never issues its token again. The key is handed on to the
// head of its waiter queue, and waiters are notified, as after a release. It
// runs like Release (the name's advisory lock, one transaction,
// synchronous commit). A retry after an ambiguous failure may find the
// holding already gone and report removed false.
func (b *Backend) Revoke(ctx context.Context, key string, token uint64) (backend.Holding, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holding{}, false, err
	}
	if token > math.MaxInt64 {
		return backend.Holding{}, false, nil // no holding can have this token
	}
	var (
		h       backend.Holding
		removed bool
	)
	err := b.retry(ctx, "revoke", func(ctx context.Context) error {
		batch := &pgx.Batch{}
		batch.Queue("BEGIN")
		batch.Queue(b.q.lock, b.lockKey(key))
		batch.Queue(b.q.revoke, key, int64(token), b.channel, b.q.seq)
		batch.Queue("COMMIT")
		res := b.pool.SendBatch(ctx, batch)
		_, err := res.Exec()
		if err == nil {
			_, err = res.Exec()
		}
		if err == nil {
			h, err = scanHolding(res.QueryRow())
			removed = err == nil
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
		}
		if err == nil {
			_, err = res.Exec() // COMMIT: revoked only once this succeeds
		}
		if cerr := res.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return backend.Holding{}, false, fmt.Errorf("postgres: revoke %q: %w", key, err)
	}
	return h, removed, nil
}
