package sqlserver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// releaseResult is the row the release batch selects.
type releaseResult struct {
	released bool // a holding of the request's attempt matched (and ended)
	// handedTo is the holding the name was handed to, when the
	// released holding was live and the queue had a live entry.
	handedTo *backend.HandOff
}

// Release ends the holding (r.Key, r.Owner, r.Attempt, r.Token); token 0
// ends that attempt's holding whatever its token, never another attempt's
// (not even the same owner's). A live holding is handed on in the same
// transaction to the head of the name's waiter queue, which becomes the
// holder for its pickup window (backend/queue.go). The attempt's own queue
// entry, if any, is removed either way: that is how a waiter leaves the
// queue. It returns nil when nothing matched: a stale request never ends a
// newer holding.
func (b *Backend) Release(ctx context.Context, r backend.ReleaseRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	token, ok := tokenParam(r.Token)
	if !ok {
		// Never issued, so no holding matches; the batch still runs with a
		// token no row has (tokens are positive) to remove the attempt's
		// queue entry.
		token = -1
	}
	var res releaseResult
	err := b.retry(ctx, "release", []string{r.Key}, func(ctx context.Context) error {
		var err error
		res, err = b.releaseOnce(ctx, r, token)
		return err
	})
	if err != nil {
		b.logFailure(ctx, "release failed", err, "key", r.Key, "owner", r.Owner, "attempt", r.Attempt, "token", r.Token)
		return fmt.Errorf("sqlserver: release %q: %w", r.Key, err)
	}
	if h := res.handedTo; h != nil {
		b.log.DebugContext(ctx, "released and handed on", "key", r.Key, "owner", r.Owner, "attempt", r.Attempt, "token", r.Token,
			"to_owner", h.Owner, "to_attempt", h.Attempt, "to_token", h.Token, "to_poll", h.Poll)
	} else {
		b.log.DebugContext(ctx, "released", "key", r.Key, "owner", r.Owner, "attempt", r.Attempt, "token", r.Token, "deleted", res.released)
	}
	return nil
}

// releaseOnce runs the release batch once. Its row is (Released, and the
// hand-off's HandedOwner, HandedAttempt, HandedToken, HandedPoll, all NULL
// when the name was handed to no one).
func (b *Backend) releaseOnce(ctx context.Context, r backend.ReleaseRequest, token int64) (releaseResult, error) {
	var (
		released int64
		owner    sql.NullString
		attempt  sql.NullString
		handed   sql.NullInt64
		poll     sql.NullInt64
	)
	err := b.db.QueryRowContext(ctx, b.q.release, releaseArgs(r, token)...).Scan(&released, &owner, &attempt, &handed, &poll)
	if err != nil {
		return releaseResult{}, err
	}
	res := releaseResult{released: released == 1}
	switch {
	case released != 0 && released != 1:
		return releaseResult{}, fmt.Errorf("sqlserver: malformed release result (released %d)", released)
	case !owner.Valid && !attempt.Valid && !handed.Valid && !poll.Valid:
	case res.released && owner.Valid && attempt.Valid && handed.Int64 > 0 && poll.Valid:
		res.handedTo = &backend.HandOff{Key: r.Key, Owner: owner.String, Attempt: attempt.String, Token: uint64(handed.Int64), Poll: uint64(max(poll.Int64, 0))}
	default:
		return releaseResult{}, fmt.Errorf("sqlserver: malformed release result (released %d, hand-off owner valid %t, attempt valid %t, token %d, poll valid %t)",
			released, owner.Valid, attempt.Valid, handed.Int64, poll.Valid)
	}
	return res, nil
}

func releaseArgs(r backend.ReleaseRequest, token int64) []any {
	return []any{
		sql.Named("name", r.Key),
		sql.Named("owner", r.Owner),
		sql.Named("attempt", r.Attempt),
		sql.Named("token", token),
	}
}
