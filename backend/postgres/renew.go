package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

// Renew extends the live holding (r.Key, r.Owner, r.Attempt, r.Token) to the
// server's now plus r.TTL, keeping the token, and commits synchronously. It
// returns an error wrapping backend.ErrNotHeld when that holding no longer
// exists (released, expired, taken over), and other faults wrapped after
// retries.
func (b *Backend) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	if r.Token > math.MaxInt64 {
		return backend.Grant{}, fmt.Errorf("postgres: renew %q: %w", r.Key, backend.ErrNotHeld)
	}
	var (
		expires time.Time
		held    bool
	)
	err := b.retry(ctx, "renew", func(ctx context.Context) error {
		var err error
		expires, held, err = scanRenew(b.pool.QueryRow(ctx, b.q.renew, renewArgs(r)...))
		return err
	})
	if err != nil {
		return backend.Grant{}, fmt.Errorf("postgres: renew %q: %w", r.Key, err)
	}
	return renewAnswer(r, expires, held)
}

// renewArgs are the parameters of the renew statement for r (Token fits an
// int64: the callers checked).
func renewArgs(r backend.RenewRequest) []any {
	return []any{r.Key, r.Owner, r.Attempt, int64(r.Token), r.TTL.Microseconds()}
}

// scanRenew reads the answer of the renew statement: the new expiry, or held
// false when no row matched (the holding is gone).
func scanRenew(row pgx.Row) (expires time.Time, held bool, err error) {
	err = row.Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return expires, err == nil, err
}

// renewAnswer is what Renew returns for r once the statement answered.
func renewAnswer(r backend.RenewRequest, expires time.Time, held bool) (backend.Grant, error) {
	if !held {
		return backend.Grant{}, fmt.Errorf("postgres: renew %q: %w", r.Key, backend.ErrNotHeld)
	}
	return backend.Grant{Acquired: true, Token: r.Token, ExpiresAt: expires}, nil
}
