package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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

	s := newAlarms(systemClock{}, root.Send)
	defer s.stop()
	release := sync.OnceFunc(func() { close(busy.hold) })
	defer release() // before stop, whatever happens: stop waits for deliveries
	tick := func(g uint64) any { return &tickMsg{gen: g} }
	a, b := newAlarm(busyPID, tick), newAlarm(otherPID, tick)
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
