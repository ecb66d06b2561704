package leasehold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// collect reads every data point, as name → attribute set → count or sum.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	key := func(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			pts := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Count)
				}
			}
			out[m.Name] = pts
		}
	}
	return out
}

// TestMetrics: each instrument counts what it says, with the documented
// attributes and no lease name.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	f, b := backendtest.Wrap(memory.New())
	m, err := leasehold.New(b, leasehold.WithOwner("o1"), leasehold.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	other, err := leasehold.New(b, leasehold.WithOwner("o2"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	ctx := context.Background()

	kept, err := m.Acquire(ctx, "kept", leasehold.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := kept.Renew(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, "theirs"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "theirs"); !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Acquire(cancelled, "x"); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	doomed, err := m.Acquire(ctx, "doomed", leasehold.WithTTL(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	losses := m.Subscribe(1)
	defer losses.Close()
	f.FailRenew.Store(true)
	if err := doomed.Renew(ctx, 0); err == nil { // a failed renewal, whatever the timing
		t.Fatal("Renew succeeded on a failing backend")
	}
	// The loss event, not Lost(): the handle may end (its own deadline
	// check) before the engine has counted the loss; the event is
	// published after it has.
	<-losses.Events()
	f.FailRenew.Store(false)
	if err := kept.Release(ctx); err != nil {
		t.Fatal(err)
	}

	got := collect(t, reader)
	want := map[string]map[string]float64{
		"leasehold.acquire.duration": {
			"leasehold.outcome=acquired,leasehold.shared=false": 2, "leasehold.outcome=not_acquired,leasehold.shared=false": 1,
			"leasehold.outcome=canceled,leasehold.shared=false": 1,
		},
		"leasehold.leases.held": {"leasehold.shared=false": 0},
		"leasehold.losses":      {"leasehold.reason=expired": 1},
	}
	for name, pts := range want {
		for attrs, v := range pts {
			if got[name][attrs] != v {
				t.Errorf("%s{%s} = %v, want %v (all: %v)", name, attrs, got[name][attrs], v, got[name])
			}
		}
	}
	if got["leasehold.renewals"]["leasehold.outcome=ok"] < 1 || got["leasehold.renewals"]["leasehold.outcome=failed"] < 1 {
		t.Errorf("renewals = %v, want ok and failed ones", got["leasehold.renewals"])
	}
	calls := got["leasehold.backend.calls"]
	for _, a := range []string{"leasehold.operation=acquire,leasehold.outcome=ok", "leasehold.operation=release,leasehold.outcome=ok"} {
		if calls[a] < 1 {
			t.Errorf("backend.calls{%s} = %v (all: %v)", a, calls[a], calls)
		}
	}
	if len(got["leasehold.backend.duration"]) == 0 {
		t.Error("no backend.duration points")
	}
	for name, pts := range got {
		for attrs := range pts {
			for _, n := range []string{"kept", "theirs", "doomed"} {
				if attrs != "" && containsValue(attrs, n) {
					t.Errorf("%s carries a lease name: %s", name, attrs)
				}
			}
		}
	}
}

// TestMetricsSharedHoldings: holdings under a limit above 1 are counted
// apart from exclusive ones, by leasehold.shared (never by name), in the held
// count, which drops back as they are released or lost, and in the acquire
// durations.
func TestMetricsSharedHoldings(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	f, b := backendtest.Wrap(memory.New())
	m, err := leasehold.New(b, leasehold.WithOwner("o1"), leasehold.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	ctx := context.Background()
	const exclusive, shared = "leasehold.shared=false", "leasehold.shared=true"
	held := func(want map[string]float64) {
		t.Helper()
		got := collect(t, reader)["leasehold.leases.held"]
		for attrs, v := range want {
			if got[attrs] != v {
				t.Errorf("leases.held{%s} = %v, want %v (all: %v)", attrs, got[attrs], v, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("leases.held = %v, want only %v", got, want)
		}
	}

	solo, err := m.Acquire(ctx, "solo")
	if err != nil {
		t.Fatal(err)
	}
	sem := []leasehold.AcquireOption{leasehold.WithLimit(2), leasehold.WithTTL(100 * time.Millisecond)}
	kept, err := m.Acquire(ctx, "sem", sem...)
	if err != nil {
		t.Fatal(err)
	}
	doomed, err := m.Acquire(ctx, "sem", sem...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "sem", sem...); !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatalf("a third holding of a name of limit 2: %v", err)
	}
	held(map[string]float64{exclusive: 1, shared: 2})

	if err := kept.Release(ctx); err != nil {
		t.Fatal(err)
	}
	held(map[string]float64{exclusive: 1, shared: 1})

	losses := m.Subscribe(1)
	defer losses.Close()
	f.FailRenew.Store(true)
	if err := doomed.Renew(ctx, 0); err == nil {
		t.Fatal("Renew succeeded on a failing backend")
	}
	// The loss event: it is published after the engine counted the loss.
	if ev := poll.Receive(t, "the loss event", 10*time.Second, losses.Events()); ev.Token != doomed.Token() {
		t.Fatalf("lost token %d, want %d", ev.Token, doomed.Token())
	}
	f.FailRenew.Store(false)
	held(map[string]float64{exclusive: 1, shared: 0})
	if err := solo.Release(ctx); err != nil {
		t.Fatal(err)
	}
	held(map[string]float64{exclusive: 0, shared: 0})

	got := collect(t, reader)["leasehold.acquire.duration"]
	for attrs, v := range map[string]float64{
		"leasehold.outcome=acquired," + exclusive: 1, "leasehold.outcome=acquired," + shared: 2,
		"leasehold.outcome=not_acquired," + shared: 1,
	} {
		if got[attrs] != v {
			t.Errorf("acquire.duration{%s} = %v, want %v (all: %v)", attrs, got[attrs], v, got)
		}
	}
}

func containsValue(encoded, v string) bool {
	for i := 0; i+len(v) <= len(encoded); i++ {
		if encoded[i:i+len(v)] == v && (i == 0 || encoded[i-1] == '=') {
			return true
		}
	}
	return false
}

// TestHealthCheck: healthy while renewals are confirmed, unhealthy naming the
// late lease and the backend's failure when they are not, healthy again once
// the backend answers; ErrClosed after Close.
func TestHealthCheck(t *testing.T) {
	f, b := backendtest.Wrap(memory.New())
	w := &renewWatch{Backend: b, started: make(chan struct{}, 1)}
	m, err := leasehold.New(w)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job", leasehold.WithTTL(3*time.Second), leasehold.WithRenewEvery(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.HealthCheck(); err != nil {
		t.Fatalf("healthy Manager: %v", err)
	}
	f.FailRenew.Store(true)
	// What HealthCheck reads changes only as a renewal's answer is applied,
	// and the lease actor schedules the next renewal after that: every
	// change is followed by a renewal call (renewWatch.started).
	var herr error
	for deadline := time.Now().Add(5 * time.Second); herr == nil; herr = m.HealthCheck() {
		select {
		case <-w.started:
		case <-time.After(time.Until(deadline)):
			t.Fatal("HealthCheck still nil with renewals failing")
		}
	}
	if !errors.Is(herr, leasehold.ErrUnhealthy) || !errors.Is(herr, backendtest.ErrInjected) {
		t.Errorf("HealthCheck = %v, want ErrUnhealthy naming the backend's failure", herr)
	}
	f.FailRenew.Store(false)
	for deadline := time.Now().Add(5 * time.Second); m.HealthCheck() != nil; {
		select {
		case <-w.started:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("still unhealthy after the backend recovered: %v", m.HealthCheck())
		}
	}
	if l.Err() != nil {
		t.Errorf("the lease was lost: %v", l.Err())
	}
	_ = m.Close(ctx)
	if err := m.HealthCheck(); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("HealthCheck after Close = %v", err)
	}
}

// renewWatch passes every call to Backend and tells, on started (without
// blocking: one pending tick is enough), that a renewal call has begun. A
// lease actor hands the renewer its next renewal only once it has applied
// the answer to the last one (and the backend actor has recorded the call's
// outcome before that), so a renewal call that begins says that everything
// before it has been applied.
type renewWatch struct {
	backend.Backend
	started chan struct{}
}

func (w *renewWatch) tick() {
	select {
	case w.started <- struct{}{}:
	default:
	}
}

func (w *renewWatch) Renew(ctx context.Context, r backend.RenewRequest) (backend.Grant, error) {
	w.tick()
	return w.Backend.Renew(ctx, r)
}

func (w *renewWatch) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	w.tick()
	return w.Backend.RenewBatch(ctx, rs)
}

func (w *renewWatch) Batch(ctx context.Context, calls []backend.Call) {
	for _, c := range calls {
		if c.Op == backend.OpRenew {
			w.tick()
			break
		}
	}
	w.Backend.Batch(ctx, calls)
}
