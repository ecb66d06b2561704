package leaseholdtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// Release and Close: idempotent releases, Close releasing everything.

func (s *suite) mDoubleRelease(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	l := mustAcquire(t, m, "job")
	before := p.f.Releases.Load()
	for range 3 {
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.f.Releases.Load() - before; n != 1 {
		t.Errorf("%d backend releases for three Release calls, want 1", n)
	}
	// After loss: nil, no backend call.
	lost := mustAcquire(t, m, "other", leasehold.WithTTL(s.short), leasehold.WithoutAutoRenew())
	waitClosed(t, "loss", lost.Lost(), s.patience)
	s.eventually(t, "the cleanup release after loss", func() bool { return p.f.Releases.Load()-before == 2 })
	if err := lost.Release(ctxT(t)); err != nil {
		t.Errorf("Release after loss = %v, want nil", err)
	}
	if n := p.f.Releases.Load() - before; n != 2 {
		t.Errorf("Release after loss called the backend (%d releases)", n)
	}
}

func (s *suite) mClose(t *testing.T) {
	p := s.pair(t)
	m, err := leasehold.New(p.b, leasehold.WithOwner("o1"), leasehold.WithKeyPrefix(p.prefix))
	if err != nil {
		t.Fatal(err)
	}
	other := p.manager(t, "o2")
	sub := m.Subscribe(8)
	var ls []*leasehold.Lease
	for i := range 3 {
		ls = append(ls, mustAcquire(t, m, fmt.Sprintf("l%d", i)))
	}
	mustAcquire(t, other, "busy")
	waiter := make(chan error, 1)
	go func() {
		_, err := m.Acquire(context.Background(), "busy", leasehold.WithWait(leasehold.WaitForever))
		waiter <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the waiter queue
	if err := m.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("waiter got %v, want ErrClosed", err)
	}
	for _, l := range ls {
		if !errors.Is(l.Err(), leasehold.ErrReleased) || !errors.Is(context.Cause(l.Context()), leasehold.ErrReleased) {
			t.Errorf("%s after Close: %v", l.Name(), l.Err())
		}
		select {
		case <-l.Lost():
			t.Errorf("%s: Close counted as a loss", l.Name())
		default:
		}
		if err := l.Release(ctxT(t)); err != nil {
			t.Errorf("Release after Close = %v", err)
		}
		if err := l.Renew(ctxT(t), 0); !errors.Is(err, leasehold.ErrClosed) {
			t.Errorf("Renew after Close = %v, want ErrClosed", err)
		}
		mustAcquire(t, other, l.Name()) // released on the backend
	}
	for ev := range sub.Events() {
		t.Errorf("LostEvent on Close: %+v", ev)
	}
	if _, err := m.Acquire(ctxT(t), "x"); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("Acquire after Close = %v", err)
	}
	if err := m.Do(ctxT(t), "x", func(context.Context) error { return nil }); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("Do after Close = %v", err)
	}
	if _, ok := <-m.Subscribe(1).Events(); ok {
		t.Error("Subscribe after Close delivered")
	}
	if err := m.Close(ctxT(t)); err != nil {
		t.Errorf("second Close = %v", err)
	}
}
