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
	var expires time.Time
	err := b.retry(ctx, "renew", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, b.q.renew, r.Key, r.Owner, r.Attempt, int64(r.Token), r.TTL.Microseconds()).Scan(&expires)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return backend.Grant{}, fmt.Errorf("postgres: renew %q: %w", r.Key, backend.ErrNotHeld)
	case err != nil:
		return backend.Grant{}, fmt.Errorf("postgres: renew %q: %w", r.Key, err)
	}
	return backend.Grant{Acquired: true, Token: r.Token, ExpiresAt: expires}, nil
}
