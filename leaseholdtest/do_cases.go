package leaseholdtest

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold"
)

// Do: runs the function under the lease, releases it, reports its loss.

func (s *suite) mDo(t *testing.T) {
	p := s.pair(t)
	m1, m2 := p.manager(t, "o1"), p.manager(t, "o2")
	ran := false
	err := m1.Do(ctxT(t), "job", func(ctx context.Context) error {
		ran = true
		if err := m2.Do(ctxT(t), "job", func(context.Context) error { return nil }); !errors.Is(err, leasehold.ErrNotAcquired) {
			t.Errorf("Do on a busy lease = %v, want ErrNotAcquired", err)
		}
		return ctx.Err()
	})
	if err != nil || !ran {
		t.Fatalf("Do = %v, ran %v", err, ran)
	}
	boom := errors.New("boom")
	if err := m1.Do(ctxT(t), "job", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Do = %v, want fn's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Do swallowed a panic")
			}
		}()
		_ = m1.Do(ctxT(t), "job", func(context.Context) error { panic("fn panics") })
	}()
	if len(m1.Held()) != 0 {
		t.Errorf("Held() after Do = %v", m1.Held())
	}
	mustAcquire(t, m2, "job") // released every time
}

func (s *suite) mDoLost(t *testing.T) {
	p := s.pair(t)
	m := p.manager(t, "o1")
	err := m.Do(ctxT(t), "job", func(ctx context.Context) error {
		p.f.FailRenew.Store(true)
		<-ctx.Done()
		return ctx.Err()
	}, leasehold.WithTTL(s.short))
	if !errors.Is(err, leasehold.ErrLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want fn's error and ErrLost", err)
	}
}
