package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/memory"
	lhmysql "github.com/leasehold/leasehold/backend/mysql"
	lhpostgres "github.com/leasehold/leasehold/backend/postgres"
	lhredis "github.com/leasehold/leasehold/backend/redis"
	"github.com/leasehold/leasehold/backend/sqlserver"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// benchSchema is the PostgreSQL and SQL Server schema (the MySQL database)
// of the bench's lease table, apart from any application's.
const benchSchema = "lhbench"

// leaseholdLocker is a leasehold Manager (one per process, as the library
// recommends) over the run's backend.
type leaseholdLocker struct {
	cfg     runConfig
	m       *leasehold.Manager
	be      backend.Backend
	closers []io.Closer // backend, then clients, closed after the Manager
	poolEnd func()
	st      lockStats
	sub     *leasehold.Subscription
	subDone sync.WaitGroup
	// meters keeps the engine's hand-off counter for the report; reader
	// reads it at the end of the run.
	meters *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

// The engine's hand-off counter: one count per grant to a waiter, by how
// the waiter learned of it.
const (
	handoffsMetric  = "leasehold.handoffs"
	handoffsViaAttr = "leasehold.handoff.via"
	handoffViaNote  = "notice" // a hand-off notice woke the waiter
	handoffViaPoll  = "poll"   // its own poll: the fallback after an expiry or a lost notice
)

// onlyHandoffs is the meter provider's view: every instrument but the
// hand-off counter is dropped, so that the bench measures leasehold with
// (about) the cost of the no-op provider it has by default, not that of
// aggregating histograms nobody reads.
func onlyHandoffs(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if i.Name == handoffsMetric {
		return sdkmetric.Stream{}, false // the default aggregation: a sum
	}
	return sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}}, true
}

// readHandoffs reads the hand-off counter from r: nil when the engine has
// no such counter (or never counted: a counter without a data point is not
// collected).
func readHandoffs(ctx context.Context, r *sdkmetric.ManualReader) (*handoffCounts, error) {
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		return nil, err
	}
	var h *handoffCounts
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != handoffsMetric || !ok {
				continue
			}
			if h == nil {
				h = &handoffCounts{}
			}
			for _, p := range sum.DataPoints {
				via, _ := p.Attributes.Value(attribute.Key(handoffsViaAttr))
				switch via.AsString() {
				case handoffViaNote:
					h.Notice += uint64(p.Value)
				case handoffViaPoll:
					h.Poll += uint64(p.Value)
				}
			}
		}
	}
	return h, nil
}

// newLeaseholdLocker connects to the run's backend and starts a Manager as
// owner "bench-p<proc>-<random>".
func newLeaseholdLocker(ctx context.Context, c runConfig, proc int) (_ *leaseholdLocker, err error) {
	l := &leaseholdLocker{cfg: c}
	defer func() {
		if err != nil {
			l.closeResources()
		}
	}()
	var be backend.Backend
	switch c.Backend {
	case backendMemory:
		be = memory.New()
	case backendRedis:
		client := redisClient(c)
		l.closers = append(l.closers, client)
		rb, err := lhredis.New(client, lhredis.WithKeyPrefix("lhbench:"), lhredis.WithRestartGrace(c.RestartGrace))
		if err != nil {
			return nil, err
		}
		be = rb
	case backendPostgres:
		pool, err := postgresPool(ctx, c)
		if err != nil {
			return nil, err
		}
		l.poolEnd = pool.Close
		if err := lhpostgres.EnsureSchema(ctx, pool, benchSchema, "leases"); err != nil {
			return nil, err
		}
		pb, err := lhpostgres.New(pool, lhpostgres.WithTable(benchSchema, "leases"))
		if err != nil {
			return nil, err
		}
		be = pb
	case backendSQLServer:
		db, err := sqlServerDB(ctx, c)
		if err != nil {
			return nil, err
		}
		l.closers = append(l.closers, db)
		if err := sqlserver.EnsureSchema(ctx, db, benchSchema, "Leases"); err != nil {
			return nil, err
		}
		sb, err := sqlserver.New(db, sqlserver.WithTable(benchSchema, "Leases"))
		if err != nil {
			return nil, err
		}
		be = sb
	case backendMySQL:
		db, err := mysqlDB(ctx, c)
		if err != nil {
			return nil, err
		}
		l.closers = append(l.closers, db)
		if err := lhmysql.EnsureSchema(ctx, db, benchSchema, "leases"); err != nil {
			return nil, err
		}
		mb, err := lhmysql.New(db, lhmysql.WithTable(benchSchema, "leases"))
		if err != nil {
			return nil, err
		}
		be = mb
	}
	l.be = be
	if err := be.Info().CheckLimit(c.limit()); err != nil {
		return nil, fmt.Errorf("%w: -limit %d on -backend %s: %w", errConfig, c.limit(), c.Backend, err)
	}
	r := make([]byte, 4)
	_, _ = rand.Read(r)
	l.reader = sdkmetric.NewManualReader()
	l.meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(l.reader), sdkmetric.WithView(onlyHandoffs))
	m, err := leasehold.New(wrapCounting(be, &l.st), leasehold.WithOwner(fmt.Sprintf("bench-p%d-%s", proc, hex.EncodeToString(r))),
		leasehold.WithMeterProvider(l.meters))
	if err != nil {
		return nil, err
	}
	l.m = m
	l.sub = m.Subscribe(4096)
	l.subDone.Go(func() {
		for ev := range l.sub.Events() {
			l.st.loss("lost:" + ev.Reason.String())
		}
	})
	return l, nil
}

func (l *leaseholdLocker) acquire(ctx context.Context, name string) (holding, error) {
	wait := l.cfg.Wait
	if wait == waitForever {
		wait = leasehold.WaitForever
	}
	opts := []leasehold.AcquireOption{leasehold.WithTTL(l.cfg.TTL), leasehold.WithWait(wait)}
	if l.cfg.limit() > 1 {
		opts = append(opts, leasehold.WithLimit(l.cfg.limit()))
	}
	lease, err := l.m.Acquire(ctx, name, opts...)
	if errors.Is(err, leasehold.ErrNotAcquired) {
		return nil, errNotAcquired
	}
	if err != nil {
		return nil, err
	}
	return leaseholdHolding{lease}, nil
}

func (l *leaseholdLocker) stats() *lockStats { return &l.st }

// close ends the Manager, then reads the hand-off counter: after Close no
// grant is left to count.
func (l *leaseholdLocker) close(ctx context.Context) error {
	err := l.m.Close(ctx)
	l.subDone.Wait()
	h, rerr := readHandoffs(ctx, l.reader)
	l.st.setHandoffs(h)
	l.closeResources()
	return errors.Join(err, rerr)
}

func (l *leaseholdLocker) closeResources() {
	if l.meters != nil {
		_ = l.meters.Shutdown(context.Background())
	}
	if l.be != nil {
		_ = l.be.Close()
	}
	for _, c := range l.closers {
		_ = c.Close()
	}
	if l.poolEnd != nil {
		l.poolEnd()
	}
}

type leaseholdHolding struct{ l *leasehold.Lease }

func (h leaseholdHolding) token() uint64         { return h.l.Token() }
func (h leaseholdHolding) lost() <-chan struct{} { return h.l.Lost() }
func (h leaseholdHolding) held() bool            { return h.l.Err() == nil }

// release never reports notHeld: leasehold tells of every loss through its
// subscription, which the locker counts already.
func (h leaseholdHolding) release(ctx context.Context) (bool, error) {
	return false, h.l.Release(ctx)
}
