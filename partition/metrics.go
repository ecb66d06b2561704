package partition

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics are a member's instruments (listed at WithMeterProvider) and their
// attribute sets, made once.
type metrics struct {
	owned         metric.Int64UpDownCounter
	moves         metric.Int64Counter
	graceExceeded metric.Int64Counter
	group         []metric.AddOption
	move          map[string][]metric.AddOption
}

// The ways an item's ownership changes, as leasehold.partition.move says.
const (
	moveTaken      = "taken"       // this member started owning it
	moveHandedBack = "handed_back" // given back for the fair share
	moveLost       = "lost"        // its lease ended (a store failure, the Manager closed)
	moveLeft       = "left"        // given back on leaving
)

func newMetrics(p metric.MeterProvider, group string) (*metrics, error) {
	meter := p.Meter("github.com/leasehold/leasehold/partition")
	m := &metrics{move: map[string][]metric.AddOption{}}
	var errs [3]error
	m.owned, errs[0] = meter.Int64UpDownCounter("leasehold.partition.items.owned",
		metric.WithDescription("Items this member holds now, those it is handing back included."))
	m.moves, errs[1] = meter.Int64Counter("leasehold.partition.moves",
		metric.WithDescription("Changes of an item's ownership at this member: taken, handed back for the fair share, lost, or given back on leaving."))
	m.graceExceeded, errs[2] = meter.Int64Counter("leasehold.partition.grace.exceeded",
		metric.WithDescription("Items handed back whose callback was still running at the end of the grace (their leases were left to expire)."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	g := attribute.String("leasehold.partition.group", group)
	m.group = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(g))}
	for _, mv := range []string{moveTaken, moveHandedBack, moveLost, moveLeft} {
		m.move[mv] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(g, attribute.String("leasehold.partition.move", mv)))}
	}
	return m, nil
}

// moved records one change of ownership; taken counts up items owned, the
// others down.
func (m *metrics) moved(how string) {
	ctx := context.Background() // measurements outlive the member's ctx
	m.moves.Add(ctx, 1, m.move[how]...)
	if how == moveTaken {
		m.owned.Add(ctx, 1, m.group...)
	} else {
		m.owned.Add(ctx, -1, m.group...)
	}
}

func (m *metrics) exceeded() { m.graceExceeded.Add(context.Background(), 1, m.group...) }
