package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// RenewBatch renews every request in one statement (one round trip, one
// synchronous commit) and returns one result per request, in order: a Grant,
// or an error wrapping backend.ErrNotHeld (the holding, named by Key, Owner,
// Attempt and Token, no longer exists) or backend.ErrInvalidRequest (that
// request breaks the limits; it is not sent). A request repeated in the batch
// gets the result of its first copy. A non-nil error means the batch as a
// whole could not be confirmed (after retries); then no result is returned
// and the caller must treat every renewal as unconfirmed.
func (b *Backend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	type holding struct {
		key, owner, attempt string
		token               uint64
	}
	results := make([]backend.RenewResult, len(rs))
	first := make(map[holding]int, len(rs)) // holding -> index of its first request
	var (
		names, owners, attempts []string
		tokens, ttls            []int64
		ords                    []int32 // index in rs of each sent request
	)
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			results[i].Err = err
			continue
		}
		h := holding{r.Key, r.Owner, r.Attempt, r.Token}
		if _, dup := first[h]; dup {
			continue
		}
		first[h] = i
		results[i].Err = fmt.Errorf("postgres: renew %q: %w", r.Key, backend.ErrNotHeld)
		if r.Token > math.MaxInt64 {
			continue // no holding can have it
		}
		names, owners, attempts = append(names, r.Key), append(owners, r.Owner), append(attempts, r.Attempt)
		tokens, ttls = append(tokens, int64(r.Token)), append(ttls, r.TTL.Microseconds())
		ords = append(ords, int32(i))
	}
	if len(names) > 0 {
		type renewed struct {
			ord     int32
			expires time.Time
		}
		var got []renewed
		err := b.retry(ctx, "renew batch", func(ctx context.Context) error {
			got = got[:0]
			rows, err := b.pool.Query(ctx, b.q.renewBatch, names, owners, attempts, tokens, ttls, ords)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var r renewed
				if err := rows.Scan(&r.ord, &r.expires); err != nil {
					return err
				}
				got = append(got, r)
			}
			return rows.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("postgres: renew batch of %d: %w", len(names), err)
		}
		for _, r := range got {
			i := int(r.ord)
			results[i] = backend.RenewResult{Grant: backend.Grant{Acquired: true, Token: rs[i].Token, ExpiresAt: r.expires}}
		}
	}
	for i, r := range rs {
		if j, ok := first[holding{r.Key, r.Owner, r.Attempt, r.Token}]; ok && j != i {
			results[i] = results[j]
		}
	}
	return results, nil
}
