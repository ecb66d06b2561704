package leasehold

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// WithMeterProvider sets where the Manager's metrics go, through the
// OpenTelemetry metric API. Default: the global provider (otel.GetMeterProvider),
// a no-op unless the application installs one.
//
// The instruments (meter "github.com/leasehold/leasehold"):
//
//	leasehold.acquire.duration  histogram, s     leasehold.outcome = acquired | not_acquired | canceled | error,
//	                                               leasehold.shared = true | false
//	leasehold.leases.held       up-down counter  leasehold.shared = true | false
//	leasehold.renewals          counter          leasehold.outcome = ok | failed
//	leasehold.losses            counter          leasehold.reason = expired | rejected
//	leasehold.handoffs          counter          leasehold.handoff.via = notice | poll
//	leasehold.backend.calls     counter          leasehold.operation = acquire | renew | release | renew_batch,
//	leasehold.backend.duration  histogram, s       leasehold.outcome = ok | not_held | error
//
// leasehold.shared is true for a holding under WithLimit(n > 1), and for
// an Acquire that asks for one: semaphore holdings apart from exclusive
// leases. No instrument carries the lease name: names are unbounded, and a
// time series per name would grow without limit. Use Manager.Held,
// Manager.Holders and Manager.Inspect for per-name questions.
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(c *managerConfig) {
		if p == nil {
			c.fail(fmt.Errorf("%w: WithMeterProvider(nil)", ErrInvalidOption))
		}
		c.meters = p
	}
}
