package partition_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/internal/poll"
	"github.com/leasehold/leasehold/partition"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// collect reads every data point, as instrument → attribute set → value.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			pts := map[string]int64{}
			if d, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range d.DataPoints {
					pts[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
				}
			}
			out[m.Name] = pts
		}
	}
	return out
}

// TestMetrics: items owned and moves by kind, with the group and no item
// among the attributes.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	store := memory.New()
	opts := []partition.Option{partition.WithMeterProvider(provider), partition.WithRebalanceEvery(10 * time.Millisecond)}
	a, err := partition.Join(context.Background(), newManager(t, store, "node-a"), "g", itemsN(4), partition.Callbacks{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	const group = "leasehold.partition.group=g"
	if got := collect(t, reader); got["leasehold.partition.items.owned"][group] != 4 ||
		got["leasehold.partition.moves"][group+",leasehold.partition.move=taken"] != 4 {
		t.Errorf("after joining alone with 4 items: %v", got)
	}
	b, err := partition.Join(context.Background(), newManager(t, store, "node-b"), "g", itemsN(4), partition.Callbacks{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "2 items each", patience, func() bool { return len(a.Owned()) == 2 && len(b.Owned()) == 2 })
	if err := a.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "node-b owning all 4", patience, func() bool { return len(b.Owned()) == 4 })
	if err := b.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := collect(t, reader)
	want := map[string]map[string]int64{
		"leasehold.partition.items.owned": {group: 0},
		"leasehold.partition.moves": {
			group + ",leasehold.partition.move=taken":       8, // 4 by a, 2 by b, then a's 2
			group + ",leasehold.partition.move=handed_back": 2,
			group + ",leasehold.partition.move=left":        6,
		},
	}
	for name, pts := range want {
		for attrs, v := range pts {
			if got[name][attrs] != v {
				t.Errorf("%s{%s} = %d; want %d", name, attrs, got[name][attrs], v)
			}
		}
		if len(got[name]) != len(pts) {
			t.Errorf("%s has series %v; want only %v", name, got[name], pts)
		}
	}
}
