package sqlserver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// Renew extends the live holding (r.Key, r.Owner, r.Attempt, r.Token) to the
// server's now + r.TTL and keeps its token. It returns an error wrapping
// backend.ErrNotHeld when that holding was released, expired or replaced.
func (b *Backend) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	if err := r.Validate(); err != nil {
		return backend.Grant{}, err
	}
	token, ok := tokenParam(r.Token)
	if !ok {
		return backend.Grant{}, fmt.Errorf("sqlserver: renew %q: token %d was never issued: %w", r.Key, r.Token, backend.ErrNotHeld)
	}
	var (
		grant backend.Grant
		held  bool
	)
	err := b.retry(ctx, "renew", []string{r.Key}, func(ctx context.Context) error {
		var err error
		grant, held, err = b.renewOnce(ctx, r, token)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "renew failed", err, "key", r.Key, "owner", r.Owner, "attempt", r.Attempt, "token", r.Token)
		return backend.Grant{}, fmt.Errorf("sqlserver: renew %q: %w", r.Key, err)
	}
	if !held {
		return backend.Grant{}, notHeld(r)
	}
	return grant, nil
}

// renewOnce runs the renew batch once; held is false when no row matched.
func (b *Backend) renewOnce(ctx context.Context, r backend.RenewRequest, token int64) (grant backend.Grant, held bool, err error) {
	rows, err := b.db.QueryContext(ctx, b.q.renew, renewArgs(r, token)...)
	if err != nil {
		return backend.Grant{}, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return backend.Grant{}, false, rows.Err()
	}
	var gotToken int64
	var expires sql.NullTime
	if err := rows.Scan(&gotToken, &expires); err != nil {
		return backend.Grant{}, false, fmt.Errorf("sqlserver: scanning the renew result: %w", err)
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return backend.Grant{}, false, err
	}
	if gotToken != token || !expires.Valid {
		return backend.Grant{}, false, fmt.Errorf("sqlserver: malformed renew result (token %d, want %d; expiry valid %t)", gotToken, token, expires.Valid)
	}
	return backend.Grant{Acquired: true, Token: uint64(gotToken), ExpiresAt: expires.Time.UTC()}, true, nil
}

func renewArgs(r backend.RenewRequest, token int64) []any {
	return []any{
		sql.Named("name", r.Key),
		sql.Named("owner", r.Owner),
		sql.Named("attempt", r.Attempt),
		sql.Named("token", token),
		sql.Named("ttlUs", ttlMicros(r.TTL)),
	}
}

// notHeld is the error of a renewal whose holding no longer exists.
func notHeld(r backend.RenewRequest) error {
	return fmt.Errorf("sqlserver: renew %q by %q (attempt %q) with token %d: %w", r.Key, r.Owner, r.Attempt, r.Token, backend.ErrNotHeld)
}
