// Command metrics shows leasehold's OpenTelemetry metrics and health check:
// a few workers contend for a handful of leases while /metrics serves the
// instruments through the Prometheus exporter and /healthz serves
// Manager.HealthCheck.
//
//	go -C examples run ./metrics -addr 127.0.0.1:9464 -duration 30s
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
	"sync/atomic"
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
	log.Printf("serving http://%s/metrics and /healthz; try: curl -s http://%s/metrics | grep leasehold_", addr, addr)

	var wg sync.WaitGroup
	var runs atomic.Int64
	for w := range 4 {
		wg.Go(func() { work(ctx, m, w, &runs) })
	}
	wg.Go(func() { report(ctx, m, &runs) })
	err = srv.ListenAndServe()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// report prints, every two seconds until ctx ends, how many runs the
// workers did and the Manager's health: what the metrics count.
func report(ctx context.Context, m *leasehold.Manager, runs *atomic.Int64) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			health := "ok"
			if err := m.HealthCheck(); err != nil {
				health = err.Error()
			}
			log.Printf("%d runs so far, %d leases held now; health: %s", runs.Load(), len(m.Held()), health)
		}
	}
}

// work takes turns on three partitions until ctx ends, counting its runs.
func work(ctx context.Context, m *leasehold.Manager, id int, runs *atomic.Int64) {
	for ctx.Err() == nil {
		name := fmt.Sprint("partition-", rand.IntN(3))
		err := m.Do(ctx, name, func(ctx context.Context) error {
			select { // the work, abandoned the moment the lease is lost
			case <-time.After(time.Duration(50+rand.IntN(200)) * time.Millisecond):
			case <-ctx.Done():
			}
			runs.Add(1)
			return nil
		}, leasehold.WithWait(time.Second), leasehold.WithTTL(3*time.Second))
		if err != nil && !errors.Is(err, leasehold.ErrNotAcquired) && ctx.Err() == nil {
			log.Printf("worker %d: %v", id, err)
		}
	}
}
