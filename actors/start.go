package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/engine"
	"github.com/leasehold/leasehold/messages"
	"go.opentelemetry.io/otel/metric"
)

// Config is what it takes to run the engine of one Manager. Start copies it:
// changing it afterwards changes nothing.
type Config struct {
	// Owner is the identity the leases are held as.
	Owner string
	// Backend is the store; the engine does not close it.
	Backend backend.Backend
	// Logger gets the engine's warnings (nil: none).
	Logger *slog.Logger
	// MeterProvider gets the engine's OpenTelemetry instruments (nil: no
	// metrics).
	MeterProvider metric.MeterProvider
	// MaxInFlight bounds concurrent backend calls (0: 256).
	MaxInFlight int
	// RenewBatchSize and RenewBatchDelay bound how many renewals one round
	// trip carries and how early an automatic renewal may go to join one,
	// on backends that renew in batches (0: DefaultRenewBatchSize,
	// DefaultRenewBatchDelay).
	RenewBatchSize  int
	RenewBatchDelay time.Duration
	// Pickup is the pickup window of a hand-off to this engine's waiters
	// on a store that keeps a waiter queue (0: DefaultPickup); a lease's is
	// at most a quarter of its TTL.
	Pickup time.Duration
	// Clock is the engine's time: what its lease actors read as now, and
	// the clock of every timer, alarm and renewal (nil: the system's). A
	// test sets a fake one to move time by steps.
	Clock Clock
}

// Clock is a source of time and timers for the engine; Timer is one of its
// re-armable timers.
type (
	Clock = clock.Clock
	Timer = clock.Timer
)

// Defaults of Config.
const (
	DefaultRenewBatchSize  = engine.DefaultRenewBatchSize
	DefaultRenewBatchDelay = engine.DefaultRenewBatchDelay
	DefaultPickup          = engine.DefaultPickup
)

// Engine is the running actors of one Manager: a lease actor per key in use,
// found by key for every command; the backend actor, which makes the backend
// calls; the event hub; and the registry, which retires idle lease actors
// and runs Shutdown. Its methods are safe for concurrent use.
type Engine struct {
	e   *engine.Engine
	cfg *engine.Config
}

// CallFailure is a backend call that got no answer.
type CallFailure = engine.CallFailure

// Start spawns the actors of one engine in root's system. It fails only when
// the metric instruments cannot be made.
func Start(root *actor.RootContext, cfg Config) (*Engine, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var metrics *engine.Metrics
	if cfg.MeterProvider != nil {
		var err error
		if metrics, err = engine.NewMetrics(cfg.MeterProvider); err != nil {
			return nil, fmt.Errorf("leasehold: metrics: %w", err)
		}
	}
	c := &engine.Config{
		Owner: cfg.Owner, Backend: cfg.Backend, Logger: logger, Metrics: metrics,
		MaxInFlight: cfg.MaxInFlight, RenewBatchSize: cfg.RenewBatchSize, RenewBatchDelay: cfg.RenewBatchDelay,
		Pickup: cfg.Pickup, Clock: cfg.Clock,
	}
	return &Engine{e: engine.Start(root, c, newLeaseActor), cfg: c}, nil
}

// Send routes a command of package messages (Acquire, CancelWait, Renew,
// StopRenewing, Release) to key's lease actor, spawning it when spawn is
// set. It reports false when there is no such actor (or, after Shutdown,
// none may be spawned); msg was not sent then.
func (e *Engine) Send(key string, msg any, spawn bool) bool { return e.e.Send(key, msg, spawn) }

// Subscribe and Unsubscribe add and remove a subscriber of loss events;
// Unsubscribe closes it.
func (e *Engine) Subscribe(s *messages.Sink)   { e.e.Subscribe(s) }
func (e *Engine) Unsubscribe(s *messages.Sink) { e.e.Unsubscribe(s) }

// Shutdown starts the end of the engine's work (see messages.Shutdown).
func (e *Engine) Shutdown(m *messages.Shutdown) { e.e.Shutdown(m) }

// Now is the engine's clock: the one every holding's deadline and
// confirmation time is read on.
func (e *Engine) Now() time.Time { return e.cfg.Time().Now() }

// Admit waits, under ctx, while the renewals of the leases held go out late:
// a Manager puts the leases it holds before new ones.
func (e *Engine) Admit(ctx context.Context) error { return e.e.Admit(ctx) }

// Stopped is closed once every lease actor has stopped.
func (e *Engine) Stopped() <-chan struct{} { return e.e.Stopped() }

// Stop stops every actor (after a Shutdown, there is nothing left to
// release) and waits for them and their goroutines.
func (e *Engine) Stop() { e.e.Stop() }

// Holdings lists the holdings of this engine now, in no particular order.
func (e *Engine) Holdings() []*messages.Holding { return e.e.Holdings() }

// LastFailure is the backend's last failed call, unless a later call was
// answered (nil then).
func (e *Engine) LastFailure() *CallFailure { return e.cfg.LastFailure() }

// AcquireDone records one acquire of the public API that took took and
// ended with err (nil: acquired), in the acquire duration metric; shared:
// it asked for a limit above 1.
func (e *Engine) AcquireDone(ctx context.Context, took time.Duration, err error, shared bool) {
	e.cfg.Metrics.Acquired(ctx, took, acquireOutcome(err), shared)
}

// acquireOutcome names err for the acquire duration metric.
func acquireOutcome(err error) string {
	switch {
	case err == nil:
		return engine.OutcomeAcquired
	case errors.Is(err, messages.ErrNotAcquired):
		return engine.OutcomeNotAcquired
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return engine.OutcomeCanceled
	}
	return engine.OutcomeError
}
