package engine

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/leasehold/leasehold/internal/clock"
)

// timer is one re-armable one-shot send, the only way the actors wait
// (protoactor's SetReceiveTimeout and SendRepeatedly race). Each arming gets a
// new generation, carried by its tick; the owner acts on a tick only if it
// carries the current gen, so a tick from a cancelled or re-armed timer that
// was already on its way is ignored.
type timer struct {
	cancel func()
	gen    uint64 // of the current arming; 0 when not armed
	last   uint64 // generations handed out
}

// arm (re)starts the timer on the system clock: after d, tick(gen) is sent to
// pid. (The registry's sweep; the lease actors' timers use armOn.)
func (t *timer) arm(s *scheduler.TimerScheduler, d time.Duration, pid *actor.PID, tick func(gen uint64) any) {
	t.stop()
	t.cancel = s.SendOnce(max(d, 0), pid, tick(t.next()))
}

// armOn (re)starts the timer on clock c: after d, tick(gen) is sent to pid
// through s.
func (t *timer) armOn(c clock.Clock, s actor.SenderContext, d time.Duration, pid *actor.PID, tick func(gen uint64) any) {
	t.stop()
	t.cancel = sendAfter(c, s, d, pid, tick(t.next()))
}

// next starts a new arming and returns its generation.
func (t *timer) next() uint64 {
	t.last++
	t.gen = t.last
	return t.gen
}

// fired reports whether gen is the current arming's tick, and disarms.
func (t *timer) fired(gen uint64) bool {
	if gen == 0 || gen != t.gen {
		return false
	}
	t.gen, t.cancel = 0, nil
	return true
}

func (t *timer) stop() {
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
	t.gen = 0
}

// sendAfter sends msg to pid through s once d has passed on clock c, unless
// the returned stop is called first (as scheduler.SendOnce does on the
// system's clock).
func sendAfter(c clock.Clock, s actor.SenderContext, d time.Duration, pid *actor.PID, msg any) (stop func()) {
	return c.AfterFunc(max(d, 0), func() { s.Send(pid, msg) })
}
