package backend

import (
	"context"
	"errors"
	"fmt"
)

// # Keys with several holders
//
// An AcquireRequest with Limit n > 1 asks for one of n slots of Key: a
// store whose Info.MaxLimit is at least n keeps up to n live holdings of the
// key at once, each a holding like an exclusive one (its own attempt, token,
// expiry, metadata; Renew and Release name it as always). The rules, each
// one atomic step on the store:
//
// Agreement. Every live holding of a key was granted under the same limit
// (an exclusive holding's is 1). An acquire whose limit (0 counts as 1)
// differs from the live holdings' is refused with Grant.HeldLimit set to
// theirs: nothing is granted, queued or marked. With no live holding, the
// next grant sets the key's limit.
//
// Grant. The attempt's own live holding is refreshed, as for an exclusive
// key. Otherwise a new holding needs a free slot (fewer than n live
// holdings). While the key has live holdings, its free slots go first to
// the live entries of limit n queued ahead of the attempt, in queue order,
// in the same step: each such entry is handed one as a release hands on its
// slot (below; entries of another limit, or of an attempt that holds
// already, are dropped on the way), and the attempt gets a slot only if
// one is left. Queued heads are thus never left to find a free slot by
// polling, which on a busy name they may never do: the slots that releases
// hand on reach each of them first. With no live holding, the attempt must
// be among the first n live entries of the queue, or the heads ahead of it
// must have let their turn pass (each head's turn is its Queue.Pickup,
// counted from the first acquire that found a slot free for it since the
// last grant, as for an exclusive key). A refusal because every slot is
// taken (by the hand-offs of this step too) names, in Holder, HolderToken,
// HolderExpiresAt and HolderExpiresIn, the live holding that ends first; a
// refusal for the heads' turn names no holder, with HolderExpiresIn the
// shortest turn left. A refused waiting attempt is queued as for an
// exclusive key, with its limit.
//
// Release, Revoke. Ending a live holding frees its slot and, in the same
// step, hands that one slot to the head live entry of the queue whose limit
// is the key's (entries of another limit, left from an earlier holding, are
// dropped on the way): one release, one hand-off. Revoke with token 0 ends
// the live holding that ends first.
//
// Expiry. A holding that expires frees its slot and hands nothing on by
// itself: the next acquire of the key hands it on while other holdings are
// live, and the heads' turn applies when none is (Grant). A dead head
// handed a slot costs the others its pickup window, as after a release.
// Tokens are one counter per key, shared by all its holders: every grant
// and hand-off gets a token above every earlier one.
//
// Inspect answers the live holding that ends first; Holders and List answer
// every one.

// MaxLimit is the largest limit any store may declare (Info.MaxLimit) and
// any request may carry.
const MaxLimit = 1024

// CheckLimit reports why n is not a valid AcquireRequest.Limit: below 0 or
// above MaxLimit (0 and 1 both mean exclusive).
func CheckLimit(n int) error {
	if n < 0 || n > MaxLimit {
		return fmt.Errorf("%w: limit %d is outside [1, %d]", ErrInvalidRequest, n, MaxLimit)
	}
	return nil
}

// CheckLimit reports why the store i describes cannot grant limit n: n is
// invalid, or above its MaxLimit. The error wraps ErrInvalidRequest, and also
// errors.ErrUnsupported when the store is the reason.
func (i Info) CheckLimit(n int) error {
	if err := CheckLimit(n); err != nil {
		return err
	}
	if n > 1 && n > i.MaxLimit {
		return fmt.Errorf("%w: limit %d: this %s backend grants at most %d holders per key (Info.MaxLimit): %w",
			ErrInvalidRequest, n, i.Name, max(i.MaxLimit, 1), errors.ErrUnsupported)
	}
	return nil
}

// HoldersFromInspect is Holders for a store of exclusive holdings only: the
// one live holding Inspect finds, if any, with Limit 1.
func HoldersFromInspect(ctx context.Context, b Backend, key string) ([]Holder, error) {
	h, held, err := b.Inspect(ctx, key)
	if err != nil || !held {
		return nil, err
	}
	if h.Limit == 0 {
		h.Limit = 1
	}
	return []Holder{h}, nil
}
