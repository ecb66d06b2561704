package actors

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/messages"
)

// A held lease with nothing to do sleeps: its actor is stopped, and its
// renewals go on without one. Whatever comes for it then (a refusal of a
// renewal, its deadline, a command, Close) wakes it in a new actor that
// carries on from where the last one was.
func TestSleepingLease(t *testing.T) {
	const every = 3 * time.Second
	for _, tc := range []struct {
		name string
		// then does something to the sleeping lease and checks the outcome.
		then func(r *leaseRig, h *lease.Holding) error
	}{
		{"renewals confirmed leave it asleep; a refusal wakes it, and it is lost", func(r *leaseRig, h *lease.Holding) error {
			for range 2 {
				before, _, _ := h.Confirmed()
				r.clock.Advance(every)
				if err := r.answerNext(backend.OpRenew, granted(5), nil); err != nil {
					return err
				}
				if err := waitUntil(func() bool { at, _, _ := h.Confirmed(); return !at.Equal(before) }); err != nil {
					return fmt.Errorf("the renewal was never confirmed: %w", err)
				}
				if !r.e.e.Asleep(r.key) {
					return errors.New("a confirmed renewal woke the lease")
				}
			}
			r.clock.Advance(every)
			if err := r.answerNext(backend.OpRenew, backend.Grant{}, backend.ErrNotHeld); err != nil {
				return err
			}
			if err := r.expectCall(backend.OpRelease); err != nil { // lose releases what may be left
				return err
			}
			if !errors.Is(h.Err(), messages.ErrLost) {
				return fmt.Errorf("holding ends with %v, want ErrLost", h.Err())
			}
			return nil
		}},
		{"its deadline wakes it, and it is lost", func(r *leaseRig, h *lease.Holding) error {
			r.clock.Advance(every)
			if err := r.expectCall(backend.OpRenew); err != nil { // never answered
				return err
			}
			r.clock.Advance(10 * time.Second)
			if err := r.expectCall(backend.OpRelease); err != nil {
				return err
			}
			if !errors.Is(h.Err(), messages.ErrLost) {
				return fmt.Errorf("holding ends with %v, want ErrLost", h.Err())
			}
			return nil
		}},
		{"a Release wakes it and releases", func(r *leaseRig, h *lease.Holding) error {
			reply := make(chan error, 1)
			r.send(&messages.Release{Key: r.key, Token: 5, Reply: reply})
			if err := r.answerNext(backend.OpRelease, backend.Grant{}, nil); err != nil {
				return err
			}
			return <-reply
		}},
		{"Close wakes it and releases", func(r *leaseRig, h *lease.Holding) error {
			done := make(chan struct{})
			r.e.Shutdown(&messages.Shutdown{Ctx: context.Background(), Reply: done})
			if err := r.answerNext(backend.OpRelease, backend.Grant{}, nil); err != nil {
				return err
			}
			<-done
			if !errors.Is(h.Err(), messages.ErrReleased) {
				return fmt.Errorf("holding ends with %v, want ErrReleased", h.Err())
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLeaseRig(t, false)
			reply := make(chan messages.AcquireReply, 1)
			r.send(&messages.Acquire{Name: r.key, Key: r.key, TTL: 10 * time.Second, AutoRenew: true, RenewEvery: every,
				Ctx: context.Background(), Ticket: new(lease.Ticket), Reply: reply})
			if err := r.answerNext(backend.OpAcquire, granted(5), nil); err != nil {
				t.Fatal(err)
			}
			h := (<-reply).Holding
			if h == nil {
				t.Fatal("not acquired")
			}
			if err := waitUntil(func() bool { r.e.e.Sweep(); return r.e.e.Asleep(r.key) }); err != nil {
				t.Fatalf("the held lease never slept: %v", err)
			}
			if err := tc.then(r, h); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// expectCall waits for the backend's next call, which must be of op, and
// keeps it in flight.
func (r *leaseRig) expectCall(op backend.Op) error {
	select {
	case c := <-r.b.calls:
		if c.op != op {
			return fmt.Errorf("backend call %v, want %v", c.op, op)
		}
		r.inFlight = append(r.inFlight, c)
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("no backend call %v", op)
	}
}

// answerNext waits for the backend's next call, of op, and answers it.
func (r *leaseRig) answerNext(op backend.Op, g backend.Grant, err error) error {
	if e := r.expectCall(op); e != nil {
		return e
	}
	return answer(op, g, err).do(r)
}

// waitUntil polls cond until it holds, or fails after 5 s.
func waitUntil(cond func() bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("not within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
