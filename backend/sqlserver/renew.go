package sqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Renew extends the live holding of (r.Key, r.Owner, r.Token) to the server's
// now + r.TTL and keeps its token. It returns an error wrapping
// backend.ErrNotHeld when that holding was released, expired or taken over.
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
	err := b.retry(ctx, "renew", func(ctx context.Context) error {
		var err error
		grant, held, err = b.renewOnce(ctx, r.Key, r.Owner, token, r.TTL)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "renew failed", err, "key", r.Key, "owner", r.Owner, "token", r.Token)
		return backend.Grant{}, fmt.Errorf("sqlserver: renew %q: %w", r.Key, err)
	}
	if !held {
		return backend.Grant{}, fmt.Errorf("sqlserver: renew %q by %q with token %d: %w", r.Key, r.Owner, r.Token, backend.ErrNotHeld)
	}
	return grant, nil
}

// renewOnce runs the renew batch once; held is false when no row matched.
func (b *Backend) renewOnce(ctx context.Context, key, owner string, token int64, ttl time.Duration) (grant backend.Grant, held bool, err error) {
	rows, err := b.db.QueryContext(ctx, b.q.renew, renewArgs(key, owner, token, ttl)...)
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

func renewArgs(key, owner string, token int64, ttl time.Duration) []any {
	return []any{
		sql.Named("name", key),
		sql.Named("owner", owner),
		sql.Named("token", token),
		sql.Named("ttlUs", ttlMicros(ttl)),
	}
}
