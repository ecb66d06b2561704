package redis

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Inspect implements backend.Backend: the live holding of key, read in one
// script so that the fields and the remaining time belong together.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	if err := b.closed(); err != nil {
		return backend.Holder{}, false, err
	}
	var (
		reply any
		err   error
	)
	if terr := b.roundTrip(ctx, []string{key}, func(ctx context.Context) {
		reply, err = inspectScript.Run(ctx, b.client, []string{b.LeaseKey(key)}).Result()
	}); terr != nil {
		return backend.Holder{}, false, fmt.Errorf("redis: inspect %q: %w", key, terr)
	}
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("redis: inspect %q: %w", key, err)
	}
	hs, err := parseHoldings(key, reply)
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("redis: inspect %q: %w", key, err)
	}
	if len(hs) == 0 {
		return backend.Holder{}, false, nil
	}
	// The holding that ends first, as a refusal names it (backend/limit.go).
	first := hs[0]
	for _, h := range hs[1:] {
		if h.ExpiresIn < first.ExpiresIn {
			first = h
		}
	}
	return first, true, nil
}

// Holders implements backend.Backend: every live holding of key, in token
// order, read with the inspect script (which answers them all for a name
// held under a limit above 1).
func (b *Backend) Holders(ctx context.Context, key string) ([]backend.Holder, error) {
	if err := backend.CheckText("key", key); err != nil {
		return nil, err
	}
	if err := b.closed(); err != nil {
		return nil, err
	}
	var (
		reply any
		err   error
	)
	if terr := b.roundTrip(ctx, []string{key}, func(ctx context.Context) {
		reply, err = inspectScript.Run(ctx, b.client, []string{b.LeaseKey(key)}).Result()
	}); terr != nil {
		return nil, fmt.Errorf("redis: holders %q: %w", key, terr)
	}
	if err != nil {
		return nil, fmt.Errorf("redis: holders %q: %w", key, err)
	}
	hs, err := parseHoldings(key, reply)
	if err != nil {
		return nil, fmt.Errorf("redis: holders %q: %w", key, err)
	}
	slices.SortFunc(hs, func(a, b backend.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return hs, nil
}

// revokeReceiptTTL is how long a revoke's receipt lives: far longer than the
// resends of one call (go-redis's retries, within the call's context).
const revokeReceiptTTL = 10 * time.Minute

// Revoke implements backend.Backend: it ends the live holding of key (the one
// with token, or any when token is 0), whoever holds it, and hands it to the
// head of its queue or announces it, as a release does. The fence counter stays, so
// the token is never issued again and the holder's next renewal is refused.
// The script leaves a receipt with this call's identity beside the name's
// keys, so that go-redis's resend of the script after a lost answer reports
// the holding the first send removed, not "not there".
func (b *Backend) Revoke(ctx context.Context, key string, token uint64) (backend.Holder, bool, error) {
	if err := backend.CheckText("key", key); err != nil {
		return backend.Holder{}, false, err
	}
	if err := b.closed(); err != nil {
		return backend.Holder{}, false, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	keys := append(b.keysOf(key), b.cfg.prefix+hashTag(key)+":revoked")
	var (
		reply any
		err   error
	)
	if terr := b.roundTrip(ctx, []string{key}, func(ctx context.Context) {
		reply, err = revokeScript.Run(ctx, b.client, keys, strconv.FormatUint(token, 10), b.channelArg, key, b.handOffArg,
			hex.EncodeToString(id[:]), revokeReceiptTTL.Milliseconds(), b.forgetArg).Result()
	}); terr != nil {
		return backend.Holder{}, false, fmt.Errorf("redis: revoke %q: %w", key, terr)
	}
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("redis: revoke %q: %w", key, err)
	}
	h, removed, err := parseHolding(key, reply)
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("redis: revoke %q: %w", key, err)
	}
	return h, removed, nil
}

// parseHoldings reads the inspect script's reply: {0}, one exclusive
// holding {1, owner, token, meta, expires_ms, pttl_ms}, or a shared
// record's {2, limit, then those five of each live holding}
// (scripts/CONTRACT.md).
func parseHoldings(key string, reply any) ([]backend.Holder, error) {
	a, ok := reply.([]any)
	if !ok || len(a) == 0 {
		return nil, fmt.Errorf("%w: %v", errReply, reply)
	}
	flag, err := asInt(a[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errReply, reply)
	}
	if flag != 2 {
		h, held, err := parseHolding(key, reply)
		if err != nil || !held {
			return nil, err
		}
		return []backend.Holder{h}, nil
	}
	if len(a) < 7 || (len(a)-2)%5 != 0 {
		return nil, fmt.Errorf("%w: %v", errReply, reply)
	}
	limit, err := asInt(a[1])
	if err != nil || limit < 2 || limit > backend.MaxLimit {
		return nil, fmt.Errorf("%w: bad limit in %v", errReply, reply)
	}
	hs := make([]backend.Holder, 0, (len(a)-2)/5)
	for i := 2; i < len(a); i += 5 {
		h, err := holdingOf(key, a[i:i+5])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", err, reply)
		}
		h.Limit = int(limit)
		hs = append(hs, h)
	}
	return hs, nil
}

// parseHolding reads {0} or {1, owner, token, meta, expires_ms, pttl_ms}
// (scripts/CONTRACT.md): an exclusive holding, limit 1; revoke's answer
// from a receipt may add the holding's limit.
func parseHolding(key string, reply any) (backend.Holder, bool, error) {
	a, ok := reply.([]any)
	if !ok || len(a) == 0 {
		return backend.Holder{}, false, fmt.Errorf("%w: %v", errReply, reply)
	}
	flag, err := asInt(a[0])
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("%w: %v", errReply, reply)
	}
	if flag == 0 {
		return backend.Holder{}, false, nil
	}
	if len(a) != 6 && len(a) != 7 {
		return backend.Holder{}, false, fmt.Errorf("%w: %v", errReply, reply)
	}
	h, err := holdingOf(key, a[1:6])
	if err != nil {
		return backend.Holder{}, false, fmt.Errorf("%w: %v", err, reply)
	}
	h.Limit = 1
	if len(a) == 7 {
		// revoke's answer with the holding's limit
		n, err := asInt(a[6])
		if err != nil || n < 1 || n > backend.MaxLimit {
			return backend.Holder{}, false, fmt.Errorf("%w: bad limit in %v", errReply, reply)
		}
		h.Limit = int(n)
	}
	return h, true, nil
}

// holdingOf reads owner, token, meta, expires_ms and pttl_ms.
func holdingOf(key string, a []any) (backend.Holder, error) {
	owner, ok1 := a[0].(string)
	meta, ok2 := a[2].(string)
	token, err1 := asUint(a[1])
	ms, err2 := asInt(a[3])
	pttl, err3 := asInt(a[4])
	if !ok1 || !ok2 || err1 != nil || err2 != nil || err3 != nil {
		return backend.Holder{}, fmt.Errorf("%w: bad holding", errReply)
	}
	return backend.Holder{
		Key:       key,
		Owner:     owner,
		Token:     token,
		ExpiresAt: time.UnixMilli(ms),
		ExpiresIn: time.Duration(pttl) * time.Millisecond,
		Metadata:  meta,
	}, nil
}
