package leaseholdtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/backendtest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// observeCases check what an operator sees of a Manager on this backend: its
// health check and its metrics.
func (s *suite) observeCases() []testCase {
	return []testCase{
		{"HealthCheckFollowsRenewals", s.mHealth},
		{"HealthyAfterALongerRenew", s.mHealthAfterLongerRenew},
		{"MetricsCountCallsAndLeases", s.mMetrics},
	}
}

// mHealth: healthy while renewals are confirmed; unhealthy, naming the
// backend's failure, while they fail; healthy again once they pass.
func (s *suite) mHealth(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job", leasehold.WithTTL(time.Minute), leasehold.WithRenewEvery(s.often))
	if err := m.HealthCheck(); err != nil {
		t.Fatalf("healthy Manager: %v", err)
	}
	p.f.FailRenew.Store(true)
	var err error
	s.eventually(t, "HealthCheck to report the failing renewals", func() bool { err = m.HealthCheck(); return err != nil })
	if !errors.Is(err, leasehold.ErrUnhealthy) || !errors.Is(err, backendtest.ErrInjected) {
		t.Errorf("HealthCheck = %v, want ErrUnhealthy naming the injected fault", err)
	}
	p.f.FailRenew.Store(false)
	s.eventually(t, "HealthCheck to recover", func() bool { return m.HealthCheck() == nil })
	if l.Err() != nil {
		t.Errorf("lease lost: %v", l.Err())
	}
}

// mHealthAfterLongerRenew: after Renew with ten times the TTL the next
// automatic renewal comes ten periods later (the period stretches with the
// TTL); HealthCheck judges lateness by that period, so it stays nil until
// that renewal is confirmed, and after. (It used to judge by the acquire's
// period and call the lease unhealthy one period after the Renew.)
func (s *suite) mHealthAfterLongerRenew(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	ttl := s.short
	l := mustAcquire(t, m, "job", leasehold.WithTTL(ttl))
	if err := l.Renew(ctxT(t), 10*ttl); err != nil {
		t.Fatal(err)
	}
	renews := p.f.Renews.Load()
	deadline := time.Now().Add(10 * ttl) // the next renewal is due 10/3 TTL after the Renew
	for p.f.Renews.Load() < renews+2 {   // the stretched period's renewal, and one of the normal period
		if err := m.HealthCheck(); err != nil {
			t.Fatalf("%d automatic renewals after Renew(%v): %v", p.f.Renews.Load()-renews, 10*ttl, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d automatic renewals in %v after Renew(%v), want 2", p.f.Renews.Load()-renews, 10*ttl, 10*ttl)
		}
		time.Sleep(5 * time.Millisecond) // a probe's pace: HealthCheck has no signal to await
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lost: %v", err)
	}
}

// mMetrics: the Manager's instruments count this backend's calls and leases.
func (s *suite) mMetrics(t *testing.T) {
	p := s.pair(t)
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	m := p.manager(t, "o1", leasehold.WithMeterProvider(provider))
	l := mustAcquire(t, m, "job")
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctxT(t), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			seen[mt.Name] = true
			if sum, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == "leasehold.leases.held" {
				if len(sum.DataPoints) != 1 || sum.DataPoints[0].Value != 1 {
					t.Errorf("leases.held = %+v, want 1", sum.DataPoints)
				}
			}
		}
	}
	for _, name := range []string{"leasehold.acquire.duration", "leasehold.leases.held", "leasehold.backend.calls", "leasehold.backend.duration"} {
		if !seen[name] {
			t.Errorf("no %s after an acquire", name)
		}
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
