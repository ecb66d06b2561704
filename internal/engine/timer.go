package engine

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// timer is one re-armable scheduler.SendOnce, the only way the actors wait
// (protoactor's SetReceiveTimeout and SendRepeatedly race). Each arming gets a
// new generation, carried by its tick; the owner acts on a tick only if it
// carries the current gen, so a tick from a cancelled or re-armed timer that
// was already on its way is ignored.
type timer struct {
	cancel scheduler.CancelFunc
	gen    uint64 // of the current arming; 0 when not armed
	last   uint64 // generations handed out
}

// arm (re)starts the timer: after d, tick(gen) is sent to pid.
func (t *timer) arm(s *scheduler.TimerScheduler, d time.Duration, pid *actor.PID, tick func(gen uint64) any) {
	t.stop()
	t.last++
	t.gen = t.last
	t.cancel = s.SendOnce(max(d, 0), pid, tick(t.gen))
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
