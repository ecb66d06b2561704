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
	lhpostgres "github.com/leasehold/leasehold/backend/postgres"
	lhredis "github.com/leasehold/leasehold/backend/redis"
	"github.com/leasehold/leasehold/backend/sqlserver"
)

// benchSchema is the PostgreSQL and SQL Server schema of the bench's lease
// table, apart from any application's.
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
	}
	l.be = be
	r := make([]byte, 4)
	_, _ = rand.Read(r)
	m, err := leasehold.New(wrapCounting(be, &l.st), leasehold.WithOwner(fmt.Sprintf("bench-p%d-%s", proc, hex.EncodeToString(r))))
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
	lease, err := l.m.Acquire(ctx, name, leasehold.WithTTL(l.cfg.TTL), leasehold.WithWait(wait))
	if errors.Is(err, leasehold.ErrNotAcquired) {
		return nil, errNotAcquired
	}
	if err != nil {
		return nil, err
	}
	return leaseholdHolding{lease}, nil
}

func (l *leaseholdLocker) stats() *lockStats { return &l.st }

func (l *leaseholdLocker) close(ctx context.Context) error {
	err := l.m.Close(ctx)
	l.subDone.Wait()
	l.closeResources()
	return err
}

func (l *leaseholdLocker) closeResources() {
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
