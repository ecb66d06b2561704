package sqlserver

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// ErrReplicaUnavailable is returned (wrapped) by Acquire when a replica is
// configured and could not be read at all before the confirmation timeout.
// The grant has been released on the primary by then.
var ErrReplicaUnavailable = errors.New("sqlserver: read replica could not be read")

// replicaState is what one read of the replica showed.
type replicaState int

const (
	replicaBehind    replicaState = iota // row missing, older, or another holding
	replicaConfirmed                     // the grant's write has been replayed
)

// confirmGrant waits until the replica shows the write that made the grant.
// Without that, an asynchronous failover could lose the grant and let another
// owner acquire the name while this one works. Not confirmed in time: the
// grant is released on the primary and reported as not acquired, or, when
// that release fails too, as an error wrapping ErrReplicaNotConfirmed (the
// grant may still stand: a fault, never a refusal). Replica unreadable the
// whole time, or ctx ended: the grant is released and an error returned,
// because that is a fault rather than a busy lease.
func (b *Backend) confirmGrant(ctx context.Context, r backend.AcquireRequest, g backend.Grant, rowVersion []byte) (backend.Grant, error) {
	start := time.Now()
	owner := r.Owner
	if r.Limit > 1 {
		owner = "" // the row is the name's record (readReplica)
	}
	confirmed, err := b.waitForReplica(ctx, r.Key, owner, int64(g.Token), rowVersion)
	if confirmed {
		b.log.DebugContext(ctx, "grant confirmed on the replica", "key", r.Key, "token", g.Token, "waited", time.Since(start))
		return g, nil
	}
	releaseErr := b.releaseUnconfirmed(ctx, r, g.Token)
	switch {
	case err != nil && releaseErr != nil:
		b.logFailure(ctx, "replica confirmation failed and releasing the grant failed", err, "key", r.Key, "token", g.Token, "release_err", releaseErr)
		return backend.Grant{}, fmt.Errorf("sqlserver: acquire %q: %w; releasing the unconfirmed grant failed: %w", r.Key, err, releaseErr)
	case err != nil:
		b.logFailure(ctx, "grant released: replica confirmation failed", err, "key", r.Key, "token", g.Token)
		return backend.Grant{}, fmt.Errorf("sqlserver: acquire %q: %w", r.Key, err)
	case releaseErr != nil:
		b.log.ErrorContext(ctx, "grant not confirmed on the replica in time, and releasing it failed", "key", r.Key, "token", g.Token, "timeout", b.cfg.replicaTimeout, "err", releaseErr)
		return backend.Grant{}, fmt.Errorf("sqlserver: acquire %q: %w (within %v) and releasing it failed: %w", r.Key, ErrReplicaNotConfirmed, b.cfg.replicaTimeout, releaseErr)
	}
	b.log.WarnContext(ctx, "grant released: not confirmed on the replica in time", "key", r.Key, "token", g.Token, "timeout", b.cfg.replicaTimeout)
	return backend.Grant{}, nil
}

// waitForReplica polls the replica until it confirms the write of rowVersion,
// the replica timeout passes (false, nil) or ctx ends (false, ctx error). If no
// read succeeded before the timeout, it returns ErrReplicaUnavailable with the
// last read error.
func (b *Backend) waitForReplica(ctx context.Context, key, owner string, token int64, rowVersion []byte) (bool, error) {
	timeout := time.NewTimer(b.cfg.replicaTimeout)
	defer timeout.Stop()
	var lastErr error
	readOnce := false
	for {
		state, err := b.readReplica(ctx, key, owner, token, rowVersion)
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil:
			lastErr = err
			b.log.DebugContext(ctx, "replica read failed", "key", key, "err", err)
		case state == replicaConfirmed:
			return true, nil
		default:
			readOnce = true
		}
		poll := time.NewTimer(b.cfg.replicaPoll)
		select {
		case <-ctx.Done():
			poll.Stop()
			return false, ctx.Err()
		case <-timeout.C:
			poll.Stop()
			if !readOnce && lastErr != nil {
				return false, fmt.Errorf("%w: %w", ErrReplicaUnavailable, lastErr)
			}
			return false, nil
		case <-poll.C:
		}
	}
}

// readReplica reads the name's row on the replica. The grant's write is
// confirmed when the replica shows its RowVersion byte for byte, or a later
// RowVersion of the same holding (same owner and token: a refresh that
// happened meanwhile). A replica replays the primary's log in order, so a
// later write of the row implies the grant's write. owner "" is a grant of a
// name with several holders, whose write is of the name's record: every
// later write of the record was made under the name's lock, after the
// grant's commit, so any later RowVersion of it confirms.
func (b *Backend) readReplica(ctx context.Context, key, owner string, token int64, rowVersion []byte) (replicaState, error) {
	var (
		got      []byte
		gotOwner string
		gotToken int64
	)
	err := b.call(ctx, nil, func(ctx context.Context) error {
		return b.replica.QueryRowContext(ctx, b.q.replica, sql.Named("name", key)).Scan(&got, &gotOwner, &gotToken)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return replicaBehind, nil
	case err != nil:
		return replicaBehind, err
	}
	switch c := bytes.Compare(got, rowVersion); {
	case c == 0 && len(got) == 8:
		return replicaConfirmed, nil
	case c > 0 && gotOwner == owner && gotToken == token:
		return replicaConfirmed, nil
	case c > 0 && owner == "" && len(got) == 8:
		return replicaConfirmed, nil
	}
	return replicaBehind, nil
}

// releaseUnconfirmed releases a grant the caller will not get, even when ctx
// has ended: leaving it behind would block the name until it expires. It
// names the holding exactly (attempt and token), so it can never remove a
// newer one.
func (b *Backend) releaseUnconfirmed(ctx context.Context, r backend.AcquireRequest, token uint64) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupReleaseTimeout)
	defer cancel()
	return b.Release(rctx, backend.ReleaseRequest{Key: r.Key, Owner: r.Owner, Attempt: r.Attempt, Token: token})
}
