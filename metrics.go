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
//	leasehold.acquire.duration  histogram, s   leasehold.outcome = acquired | not_acquired | canceled | error
//	leasehold.leases.held       up-down counter
//	leasehold.renewals          counter        leasehold.outcome = ok | failed
//	leasehold.losses            counter        leasehold.reason = expired | rejected
//	leasehold.backend.calls     counter        leasehold.operation = acquire | renew | release | renew_batch,
//	leasehold.backend.duration  histogram, s     leasehold.outcome = ok | not_held | error
//
// No instrument carries the lease name: names are unbounded, and a time
// series per name would grow without limit. Use Manager.Held and
// Manager.Inspect for per-name questions.
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(c *managerConfig) {
		if p == nil {
			c.fail(fmt.Errorf("%w: WithMeterProvider(nil)", ErrInvalidOption))
		}
		c.meters = p
	}
}
