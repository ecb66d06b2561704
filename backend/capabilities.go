package backend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Unsupported answers every optional method of Backend (Batch, WatchReleases,
// WatchHandOffs, Shard) as a store without that ability does: an error
// wrapping errors.ErrUnsupported that names the method, and Shard "". A
// backend embeds it and implements what its store can do well; its Info
// declares what it implemented, since the engine goes by Info alone.
type Unsupported struct{}

// Batch answers every call with an error wrapping errors.ErrUnsupported.
func (Unsupported) Batch(_ context.Context, calls []Call) {
	for i := range calls {
		calls[i].Grant, calls[i].Err = Grant{}, unsupported("Batch")
	}
}

// WatchReleases returns an error wrapping errors.ErrUnsupported at once.
func (Unsupported) WatchReleases(context.Context, func(string)) error {
	return unsupported("WatchReleases")
}

// WatchHandOffs returns an error wrapping errors.ErrUnsupported at once.
func (Unsupported) WatchHandOffs(context.Context, string, func(HandOff), func()) error {
	return unsupported("WatchHandOffs")
}

// Shard answers "": one shard, as on a store without shards.
func (Unsupported) Shard(string) string { return "" }

func unsupported(method string) error {
	return fmt.Errorf("backend: %s: %w", method, errors.ErrUnsupported)
}

// RenewEach is a RenewBatch for a store without batch round trips: one Renew
// after another, in order. A renewal that fails other than with ErrNotHeld
// fails the batch as a whole, as RenewBatch's contract says.
func RenewEach(ctx context.Context, b Backend, rs []RenewRequest) ([]RenewResult, error) {
	out := make([]RenewResult, len(rs))
	for i, r := range rs {
		g, err := b.Renew(ctx, r)
		if err != nil && !errors.Is(err, ErrNotHeld) {
			return nil, err
		}
		out[i] = RenewResult{Grant: g, Err: err}
	}
	return out, nil
}

// RenewResult is the outcome of one renewal in a batch: a Grant, or an error
// wrapping ErrNotHeld.
type RenewResult struct {
	Grant Grant
	Err   error
}

// Op is what a Call asks for.
type Op uint8

// The calls a batch carries.
const (
	OpAcquire Op = iota + 1
	OpRenew
	OpRelease
)

func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "acquire"
	case OpRenew:
		return "renew"
	case OpRelease:
		return "release"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Call is one request of a batch and, once Batch returns, its answer. Op says
// which request field is meant.
type Call struct {
	Op      Op
	Acquire AcquireRequest
	Renew   RenewRequest
	Release ReleaseRequest

	// The answer: Grant for OpAcquire and OpRenew, Err for all three (as
	// the single call would return it).
	Grant Grant
	Err   error
}

// Holder is who holds a key now, as the store records it: what Inspect,
// List and Revoke answer about a live holding, for an operator or another
// owner.
type Holder struct {
	Key   string
	Owner string
	Token uint64
	// ExpiresAt is the end of the holding on the store's clock (for display).
	ExpiresAt time.Time
	// ExpiresIn is the time it had left when the store answered, as the
	// store measured it.
	ExpiresIn time.Duration
	Metadata  string
	// Limit is the limit the holding was granted under: 1 for an
	// exclusive holding (0 from a store that does not say: exclusive too).
	Limit int
}

// ErrRevokeUnconfirmed is returned (wrapped) by Revoke when the answer to a
// send was lost and the holding was gone when the revoke looked again: this
// call may have removed it, or it ended otherwise meanwhile.
var ErrRevokeUnconfirmed = errors.New("revoke unconfirmed: its answer was lost and the holding is gone")
