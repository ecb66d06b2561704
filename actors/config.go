package actors

import (
	"log/slog"

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
}
