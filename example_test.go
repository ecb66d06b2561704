package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func ExampleManager_Acquire() {
	ctx := context.Background()
	m, err := leasehold.New(memory.New(), leasehold.WithOwner("worker-1"))
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	lease, err := m.Acquire(ctx, "nightly-report", leasehold.WithTTL(10*time.Second))
	if errors.Is(err, leasehold.ErrNotAcquired) {
		fmt.Println("someone else is doing it")
		return
	}
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)

	// Do the work under lease.Context(): it is cancelled if the lease is lost.
	// Pass lease.Token() to the storage you write to, so that it can reject a
	// stale holder's writes.
	fmt.Println("holding", lease.Name(), "as", lease.Owner(), "token", lease.Token())
	// Output: holding nightly-report as worker-1 token 1
}

func ExampleManager_Do() {
	ctx := context.Background()
	m, err := leasehold.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	err = m.Do(ctx, "migrate-schema", func(ctx context.Context) error {
		fmt.Println("migrating, exclusively")
		return nil // ctx is cancelled if the lease is lost meanwhile
	}, leasehold.WithWait(5*time.Second))
	fmt.Println("done:", err)
	// Output:
	// migrating, exclusively
	// done: <nil>
}

func ExampleManager_Subscribe() {
	ctx := context.Background()
	m, err := leasehold.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	sub := m.Subscribe(16)
	defer sub.Close()

	// Without renewal, the lease is lost when its TTL runs out.
	if _, err := m.Acquire(ctx, "shard-7", leasehold.WithTTL(50*time.Millisecond), leasehold.WithoutAutoRenew()); err != nil {
		panic(err)
	}
	ev := <-sub.Events()
	fmt.Println("lost", ev.Name, "token", ev.Token, "reason", ev.Reason, errors.Is(ev.Err, leasehold.ErrLost))
	// Output: lost shard-7 token 1 reason expired true
}

func ExampleLeaseFrom() {
	ctx := context.Background()
	m, err := leasehold.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)

	_ = m.Do(ctx, "compact-table", func(ctx context.Context) error {
		lease, _ := leasehold.LeaseFrom(ctx) // the lease Do holds: its token fences the writes
		fmt.Println("writing with fencing token", lease.Token())
		return nil
	})
	_, ok := leasehold.LeaseFrom(ctx)
	fmt.Println("outside Do:", ok)
	// Output:
	// writing with fencing token 1
	// outside Do: false
}

func ExampleManager_Inspect() {
	ctx := context.Background()
	store := memory.New()
	worker, _ := leasehold.New(store, leasehold.WithOwner("worker-1"))
	defer worker.Close(ctx)
	observer, _ := leasehold.New(store, leasehold.WithOwner("dashboard"))
	defer observer.Close(ctx)

	if _, err := worker.Acquire(ctx, "partition-17", leasehold.WithMetadata("host=a")); err != nil {
		panic(err)
	}
	info, held, err := observer.Inspect(ctx, "partition-17")
	if err != nil {
		panic(err)
	}
	fmt.Println(held, info.Owner, info.Token, info.Metadata)
	_, held, _ = observer.Inspect(ctx, "partition-18")
	fmt.Println(held)
	// Output:
	// true worker-1 1 host=a
	// false
}

func ExampleWithMeterProvider() {
	// In an application: the OpenTelemetry SDK with the exporter of your
	// choice (examples/metrics serves them to Prometheus). Here, a reader
	// the example can look into.
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := leasehold.New(memory.New(), leasehold.WithMeterProvider(provider))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	defer m.Close(ctx)
	if _, err := m.Acquire(ctx, "job"); err != nil {
		panic(err)
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			if sum, ok := metric.Data.(metricdata.Sum[int64]); ok && metric.Name == "leasehold.leases.held" {
				fmt.Println(metric.Name, sum.DataPoints[0].Value)
			}
		}
	}
	// Output: leasehold.leases.held 1
}

func ExampleManager_HealthCheck() {
	m, err := leasehold.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer m.Close(context.Background())
	mux := http.NewServeMux() // your server's
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := m.HealthCheck(); err != nil { // names each late lease and the backend's last failure
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	fmt.Println(m.HealthCheck())
	// Output: <nil>
}
