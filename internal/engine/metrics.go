package engine

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/lease"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics are the OpenTelemetry instruments of one Manager. No instrument
// carries the lease name: names are unbounded, and a metric per name would
// grow without limit in every backend the application exports to.
//
// Every attribute set is made once here, not per measurement. The held
// count and the acquire durations say whether a holding is shared (a limit
// above 1): a bounded attribute, which tells semaphore holdings from
// exclusive leases without naming any.
type Metrics struct {
	acquireDuration metric.Float64Histogram
	held            metric.Int64UpDownCounter
	renewals        metric.Int64Counter
	losses          metric.Int64Counter
	calls           metric.Int64Counter
	callDuration    metric.Float64Histogram
	handOffs        metric.Int64Counter

	// Option slices, not single options: a variadic call with a slice
	// passed as is allocates nothing, one with a list of options does.
	acquireOutcome [2]map[string][]metric.RecordOption // by shared (1) or not (0), then outcome
	heldAdd        [2][]metric.AddOption               // by shared (1) or not (0)
	renewOK        []metric.AddOption
	renewFailed    []metric.AddOption
	lossReason     map[lease.Reason][]metric.AddOption
	callAdd        map[[2]string][]metric.AddOption
	callRecord     map[[2]string][]metric.RecordOption
	viaNotice      []metric.AddOption
	viaPoll        []metric.AddOption
}

// Outcomes and operations, as the attribute values name them.
const (
	OutcomeAcquired    = "acquired"
	OutcomeNotAcquired = "not_acquired"
	OutcomeCanceled    = "canceled"
	OutcomeError       = "error"

	opAcquire    = "acquire"
	opRenew      = "renew"
	opRelease    = "release"
	opRenewBatch = "renew_batch"

	callOK      = "ok"
	callNotHeld = "not_held"
	callError   = "error"
)

// secondsBuckets suit both a memory call (microseconds) and a long wait: the
// SDK's default buckets are meant for milliseconds.
var secondsBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// NewMetrics makes the instruments on p's meter "github.com/leasehold/leasehold".
func NewMetrics(p metric.MeterProvider) (*Metrics, error) {
	meter := p.Meter("github.com/leasehold/leasehold")
	m := &Metrics{
		acquireOutcome: [2]map[string][]metric.RecordOption{{}, {}},
		lossReason:     map[lease.Reason][]metric.AddOption{},
		callAdd:        map[[2]string][]metric.AddOption{},
		callRecord:     map[[2]string][]metric.RecordOption{},
	}
	var errs [7]error
	m.acquireDuration, errs[0] = meter.Float64Histogram("leasehold.acquire.duration",
		metric.WithUnit("s"), metric.WithDescription("Time Acquire took, waiting included, by outcome and by whether it asked for a shared holding (a limit above 1)."),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	m.held, errs[1] = meter.Int64UpDownCounter("leasehold.leases.held",
		metric.WithDescription("Leases this Manager holds now, by whether they are shared (held under a limit above 1)."))
	m.renewals, errs[2] = meter.Int64Counter("leasehold.renewals",
		metric.WithDescription("Renewals answered, by outcome (failed: not confirmed or rejected)."))
	m.losses, errs[3] = meter.Int64Counter("leasehold.losses",
		metric.WithDescription("Leases lost, by reason."))
	m.calls, errs[4] = meter.Int64Counter("leasehold.backend.calls",
		metric.WithDescription("Backend calls, by operation and outcome."))
	m.callDuration, errs[5] = meter.Float64Histogram("leasehold.backend.duration",
		metric.WithUnit("s"), metric.WithDescription("Backend call latency, by operation and outcome."),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	m.handOffs, errs[6] = meter.Int64Counter("leasehold.handoffs",
		metric.WithDescription("Keys a queued waiter got on a Queue store, by how it learned of its turn: a hand-off notice, or its own poll (the fallback after an expiry or a lost notice)."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	set := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	outcome := func(v string) attribute.KeyValue { return attribute.String("leasehold.outcome", v) }
	for s, shared := range []attribute.KeyValue{attribute.Bool(SharedAttr, false), attribute.Bool(SharedAttr, true)} {
		for _, o := range []string{OutcomeAcquired, OutcomeNotAcquired, OutcomeCanceled, OutcomeError} {
			m.acquireOutcome[s][o] = []metric.RecordOption{set(outcome(o), shared)}
		}
		m.heldAdd[s] = []metric.AddOption{set(shared)}
	}
	via := func(v string) []metric.AddOption {
		return []metric.AddOption{set(attribute.String("leasehold.handoff.via", v))}
	}
	m.viaNotice, m.viaPoll = via("notice"), via("poll")
	m.renewOK, m.renewFailed = []metric.AddOption{set(outcome("ok"))}, []metric.AddOption{set(outcome("failed"))}
	m.lossReason[lease.ReasonExpired] = []metric.AddOption{set(attribute.String("leasehold.reason", "expired"))}
	m.lossReason[lease.ReasonRejected] = []metric.AddOption{set(attribute.String("leasehold.reason", "rejected"))}
	for _, op := range []string{opAcquire, opRenew, opRelease, opRenewBatch} {
		for _, o := range []string{callOK, callNotHeld, callError} {
			attrs := set(attribute.String("leasehold.operation", op), outcome(o))
			m.callAdd[[2]string{op, o}] = []metric.AddOption{attrs}
			m.callRecord[[2]string{op, o}] = []metric.RecordOption{attrs}
		}
	}
	return m, nil
}

// SharedAttr is the attribute of leasehold.leases.held and
// leasehold.acquire.duration that says whether a holding is (or an Acquire
// asked for) one under a limit above 1.
const SharedAttr = "leasehold.shared"

func sharedIndex(shared bool) int {
	if shared {
		return 1
	}
	return 0
}

// Acquired records one Acquire call of the public API; shared: it asked for
// a limit above 1.
func (m *Metrics) Acquired(ctx context.Context, took time.Duration, outcome string, shared bool) {
	if m != nil {
		// Without the caller's cancellation: the SDK drops a measurement
		// whose context has ended, and "canceled" is one of the outcomes.
		if ctx.Err() != nil {
			ctx = context.WithoutCancel(ctx)
		}
		m.acquireDuration.Record(ctx, took.Seconds(), m.acquireOutcome[sharedIndex(shared)][outcome]...)
	}
}

func (m *Metrics) heldDelta(d int64, shared bool) {
	if m != nil {
		m.held.Add(context.Background(), d, m.heldAdd[sharedIndex(shared)]...)
	}
}

func (m *Metrics) renewed(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.renewals.Add(context.Background(), 1, m.renewOK...)
	} else {
		m.renewals.Add(context.Background(), 1, m.renewFailed...)
	}
}

// handedOff records a key a queued waiter got, by notice or by its own poll.
func (m *Metrics) handedOff(byNotice bool) {
	if m == nil {
		return
	}
	if byNotice {
		m.handOffs.Add(context.Background(), 1, m.viaNotice...)
	} else {
		m.handOffs.Add(context.Background(), 1, m.viaPoll...)
	}
}

func (m *Metrics) lost(reason lease.Reason) {
	if m != nil {
		m.losses.Add(context.Background(), 1, m.lossReason[reason]...)
	}
}

// called records one backend call (a batch counts once, as renew_batch).
func (m *Metrics) called(op string, took time.Duration, err error) {
	if m == nil {
		return
	}
	o := callOK
	switch {
	case err == nil:
	case errors.Is(err, backend.ErrNotHeld):
		o = callNotHeld
	default:
		o = callError
	}
	k := [2]string{op, o}
	m.calls.Add(context.Background(), 1, m.callAdd[k]...)
	m.callDuration.Record(context.Background(), took.Seconds(), m.callRecord[k]...)
}
