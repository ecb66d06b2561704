package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/internal/clock"
	"github.com/leasehold/leasehold/internal/clock/clocktest"
	"github.com/leasehold/leasehold/internal/lease"
)

// tickSink is an actor that reports its ticks and, when hold is set, does not
// return from the first one until hold is closed: it stands for a mailbox
// kept busy by a name under contention, which holds the goroutine that
// delivered to it (the caller-runs dispatcher runs it there).
type tickSink struct {
	got  chan uint64
	hold chan struct{}
}

func (s *tickSink) Receive(ctx actor.Context) {
	if t, ok := ctx.Message().(*tickMsg); ok {
		s.got <- t.gen
		if s.hold != nil {
			<-s.hold
			s.hold = nil
		}
	}
}

type tickMsg struct{ gen uint64 }

// A tick whose actor holds the goroutine that delivered it must not hold up
// the other alarms: the timer goroutine hands ticks to deliverers and runs no
// actor itself. (When the timer goroutine sent ticks itself, the second alarm
// here was never delivered while the first actor held it.)
func TestAlarmHeldByOneActorDelaysNoOther(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	root := system.Root
	props := func(s *tickSink) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return s }, actor.WithDispatcher(dispatcher))
	}
	busy := &tickSink{got: make(chan uint64, 1), hold: make(chan struct{})}
	other := &tickSink{got: make(chan uint64, 1)}
	busyPID, otherPID := root.Spawn(props(busy)), root.Spawn(props(other))
	defer root.Stop(busyPID)
	defer root.Stop(otherPID)

	pids := map[*entry]*actor.PID{}
	s := newAlarms(clock.System{}, func(to *entry, msg any) { root.Send(pids[to], msg) })
	defer s.stop()
	release := sync.OnceFunc(func() { close(busy.hold) })
	defer release() // before stop, whatever happens: stop waits for deliveries
	tick := func(g uint64) any { return &tickMsg{gen: g} }
	busyEntry, otherEntry := &entry{key: "busy"}, &entry{key: "other"}
	pids[busyEntry], pids[otherEntry] = busyPID, otherPID
	a, b := newAlarm(busyEntry, tick), newAlarm(otherEntry, tick)
	now := time.Now()
	s.arm(a, now)
	<-busy.got // a's deliverer is now held inside busy's handler
	s.arm(b, now)
	select {
	case <-other.got:
	case <-time.After(30 * time.Second):
		t.Fatal("the second alarm was not delivered while the first actor held its deliverer")
	}
	release()
}

// An alarm that follows a deadline does not tick when the deadline has moved
// on by the time it comes: it waits for the new one, and ticks then.
func TestAlarmFollowsADeadlineThatMovedOn(t *testing.T) {
	clock := clocktest.New()
	got := make(chan any, 4)
	s := newAlarms(clock, func(_ *entry, msg any) { got <- msg })
	defer s.stop()
	t0 := clock.Now()
	d := lease.NewHolding("n", "n", "o", "a", "", 1, time.Time{}, clock.Now)
	d.SetDeadline(t0.Add(time.Second))
	a := newAlarm(nil, func(g uint64) any { return &tickMsg{gen: g} })
	s.armFollowing(a, d.Deadline(), d)
	d.SetDeadline(t0.Add(3 * time.Second)) // as the renewer moves it on

	clock.Set(t0.Add(time.Second))
	s.fire()
	s.mu.Lock()
	at, queued := a.at, a.index >= 0
	s.mu.Unlock()
	if !queued || !at.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("after the old deadline: queued %v at %v; want queued for the new deadline", queued, at.Sub(t0))
	}

	clock.Set(t0.Add(3 * time.Second))
	s.fire()
	select {
	case m := <-got:
		if tm := m.(*tickMsg); !s.fired(a, tm.gen) {
			t.Errorf("tick of generation %d is not the alarm's arming", tm.gen)
		}
	case <-time.After(30 * time.Second): // it comes at once
		t.Fatal("no tick at the new deadline")
	}
}
