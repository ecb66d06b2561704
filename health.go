package leasehold

import (
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/engine"
)

// ErrUnhealthy is what HealthCheck's errors match.
var ErrUnhealthy = errors.New("leasehold: unhealthy")

// HealthCheck returns nil while every auto-renewed lease has had a renewal
// confirmed within its renew period plus a margin (a tenth of its TTL, at most
// a second; period and TTL those of the last renewal: after Renew with
// another TTL the period in force stretches with it) and the backend answered its last call; otherwise an error
// (matching ErrUnhealthy) naming each late lease and the backend's last
// failure. It makes no backend call, so it is cheap enough for a liveness or
// readiness probe:
//
//	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
//		if err := m.HealthCheck(); err != nil {
//			http.Error(w, err.Error(), http.StatusServiceUnavailable)
//		}
//	})
//
// After Close it returns ErrClosed.
func (m *Manager) HealthCheck() error {
	if m.closed.Load() {
		return ErrClosed
	}
	var problems []error
	now := m.engine.Now() // the clock the confirmations were read on
	if f := m.engine.LastFailure(); f != nil {
		problems = append(problems, fmt.Errorf("backend %s: last %s call failed %v ago: %w",
			m.b.Info().Name, f.Op, now.Sub(f.At).Round(time.Millisecond), f.Err))
	}
	for _, h := range m.engine.Holdings() {
		if !h.AutoRenew || h.Err() != nil {
			continue
		}
		// The period in force: a Renew with another TTL stretches or
		// shrinks the one after it.
		at, ttl, every := h.Confirmed()
		since := now.Sub(at)
		if allowed := every + engine.HealthSlack(ttl); since > allowed {
			problems = append(problems, fmt.Errorf("lease %q (token %d): no renewal confirmed for %v (next one due %v after the last)",
				h.Name, h.Token, since.Round(time.Millisecond), every))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUnhealthy, errors.Join(problems...))
}
