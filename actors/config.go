package actors

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// Config is what every actor of one Manager shares. It is read-only once the
// registry is spawned.
type Config struct {
	Owner   string
	Backend backend.Backend
	Logger  *slog.Logger
	Held    *HeldSet
	// MaxInFlight bounds concurrent backend calls (default 256).
	MaxInFlight int
	// RenewBatchSize and RenewBatchDelay bound how many renewals one round
	// trip carries and how long a renewal may wait to join one, for
	// backends that implement backend.BatchRenewer.
	RenewBatchSize  int
	RenewBatchDelay time.Duration

	// notifications is true while the backend announces releases; waiters
	// poll less often then.
	notifications atomic.Bool
}

// Defaults of the batching options.
const (
	DefaultRenewBatchSize  = 500
	DefaultRenewBatchDelay = 50 * time.Millisecond
)
