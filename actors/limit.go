package actors

import (
	"fmt"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/engine"
	"github.com/leasehold/leasehold/messages"
)

// Leases with several holders: an Acquire with a Limit above 1 has a lease
// actor of its own, routed by a key of its own (RouteKey), whose store key is
// the Acquire's Key. Its states are an exclusive lease's; only the store
// counts the holders (backend/limit.go).

// RouteKey is the key to route an Acquire with a Limit above 1 by (and the
// commands of its holding: Holding.Route): key, a NUL, and id, which must be
// unique among this engine's holdings of key. No lease name holds a NUL,
// so it never routes to an exclusive lease's actor.
func RouteKey(key, id string) string { return engine.RouteKey(key, id) }

// checkLimit refuses an Acquire whose Limit the store cannot grant, or that
// came to the wrong kind of actor, before any backend call.
func (a *leaseActor) checkLimit(m *messages.Acquire) error {
	grouped := a.key != a.entry.Key()
	if m.Limit <= 1 && !grouped {
		return nil // the exclusive lease: nothing to check
	}
	if err := a.cfg.Info().CheckLimit(m.Limit); err != nil {
		return fmt.Errorf("%w: acquire %q: %w", messages.ErrInvalidOption, m.Name, err)
	}
	if grouped != (m.Limit > 1) {
		return fmt.Errorf("%w: acquire %q with limit %d: %w: an Acquire with a limit above 1, and only one, is routed by RouteKey", messages.ErrInvalidOption, m.Name, m.Limit, backend.ErrInvalidRequest)
	}
	return nil
}
