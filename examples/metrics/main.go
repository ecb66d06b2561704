// Command metrics shows leasehold's OpenTelemetry metrics and health check:
// a few workers contend for a handful of leases while /metrics serves the
// instruments through the Prometheus exporter and /healthz serves
// Manager.HealthCheck.
//
//	go run ./examples/metrics -addr 127.0.0.1:9464 -duration 30s
//	curl -s 127.0.0.1:9464/metrics | grep leasehold_
//	curl -si 127.0.0.1:9464/healthz
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9464", "where to serve /metrics and /healthz")
	duration := flag.Duration("duration", 0, "stop after this long (0: at Ctrl-C)")
	flag.Parse()
	if err := run(*addr, *duration); err != nil {
		log.Fatal(err)
	}
}

func run(addr string, duration time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	exporter, err := prometheus.New() // registers with the default Prometheus registry
	if err != nil {
		return err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())

	m, err := leasehold.New(memory.New(), leasehold.WithMeterProvider(provider))
	if err != nil {
		return err
	}
	defer m.Close(context.WithoutCancel(ctx))

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := m.HealthCheck(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("serving http://%s/metrics and /healthz", addr)

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() { work(ctx, m, w) })
	}
	err = srv.ListenAndServe()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// work takes turns on three partitions until ctx ends.
func work(ctx context.Context, m *leasehold.Manager, id int) {
	for ctx.Err() == nil {
		name := fmt.Sprint("partition-", rand.IntN(3))
		err := m.Do(ctx, name, func(ctx context.Context) error {
			select { // the work, abandoned the moment the lease is lost
			case <-time.After(time.Duration(50+rand.IntN(200)) * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		}, leasehold.WithWait(time.Second), leasehold.WithTTL(3*time.Second))
		if err != nil && !errors.Is(err, leasehold.ErrNotAcquired) && ctx.Err() == nil {
			log.Printf("worker %d: %v", id, err)
		}
	}
}
