package leasehold

import (
	"context"
	"fmt"
)

// Inspect asks the backend who holds name now, whoever it is: Owner, Token,
// ExpiresAt (on the backend's clock) and Metadata. held is false when nobody
// holds it. Bad names get ErrInvalidName before any backend call. It decides
// nothing and changes nothing, so it goes straight to the backend rather than
// through the lease's actor.
func (m *Manager) Inspect(ctx context.Context, name string) (info LeaseInfo, held bool, err error) {
	if m.closed.Load() {
		return LeaseInfo{}, false, ErrClosed
	}
	key, err := m.keyOf(name)
	if err != nil {
		return LeaseInfo{}, false, err
	}
	h, held, err := m.b.Inspect(ctx, key)
	if err != nil || !held {
		if err != nil {
			err = fmt.Errorf("leasehold: inspect %q: %w", name, err)
		}
		return LeaseInfo{}, false, err
	}
	return LeaseInfo{Name: name, Owner: h.Owner, Token: h.Token, ExpiresAt: h.ExpiresAt, Metadata: h.Metadata, Limit: max(h.Limit, 1)}, true, nil
}

// Holders asks the backend for every live holding of name, whoever holds
// it, in token order: one at most for an exclusive lease, up to its limit
// for one acquired WithLimit (Inspect answers only the one that ends first).
// None when nobody holds it. Bad names get ErrInvalidName before any backend
// call; like Inspect, it changes nothing.
func (m *Manager) Holders(ctx context.Context, name string) ([]LeaseInfo, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	key, err := m.keyOf(name)
	if err != nil {
		return nil, err
	}
	hs, err := m.b.Holders(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("leasehold: holders of %q: %w", name, err)
	}
	out := make([]LeaseInfo, 0, len(hs))
	for _, h := range hs {
		out = append(out, LeaseInfo{Name: name, Owner: h.Owner, Token: h.Token, ExpiresAt: h.ExpiresAt, Metadata: h.Metadata, Limit: max(h.Limit, 1)})
	}
	return out, nil
}
