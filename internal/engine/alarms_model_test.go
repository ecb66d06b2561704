package engine

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/clock/clocktest"
)

// TestAlarmsModel runs random sequences of arm, re-arm, disarm and fire on a
// fake clock against a plain model of the alarm heap, firing whenever its
// timer is armed for: every armed alarm ticks exactly once, with the
// generation of its current arming, never before its time and never after
// it; a tick of an arming replaced since is told apart (fired says false).
// LEASEHOLD_MODEL_LONG=1 runs it long.
func TestAlarmsModel(t *testing.T) {
	sequences, steps := modelRuns()
	for seed := range uint64(sequences) {
		if err := runAlarmsModel(seed, steps); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// modelTick is what a model alarm sends: which alarm, which arming.
type modelTick struct {
	i   int
	gen uint64
}

// modelAlarm is the model of one alarm: armed for at, or not; gens is how
// many armings it has had (the current one's generation, when armed).
type modelAlarm struct {
	armed bool
	at    time.Time
	gens  uint64
}

type alarmsModel struct {
	rng   *rand.Rand
	clock *clocktest.Fake
	s     *alarms
	as    []*alarm
	m     []modelAlarm
	ticks chan modelTick
}

func runAlarmsModel(seed uint64, steps int) error {
	rng := rand.New(rand.NewPCG(seed, 11))
	w := &alarmsModel{rng: rng, clock: clocktest.New(), ticks: make(chan modelTick, 4096)}
	w.s = newAlarms(w.clock, func(_ *entry, msg any) { w.ticks <- msg.(modelTick) })
	n := 1 + rng.IntN(40)
	for i := range n {
		w.as = append(w.as, newAlarm(&entry{key: strconv.Itoa(i)}, func(gen uint64) any { return modelTick{i, gen} }))
	}
	w.m = make([]modelAlarm, n)
	for step := range steps {
		var err error
		switch op := rng.IntN(10); {
		case op < 5:
			w.arm(rng.IntN(n))
		case op < 7:
			i := rng.IntN(n)
			w.s.disarm(w.as[i])
			w.m[i].armed = false
		case op < 8:
			w.advance()
		default:
			_, err = w.fire()
		}
		if err == nil {
			err = w.check()
		}
		if err != nil {
			return fmt.Errorf("%d alarms, step %d: %w", n, step, err)
		}
	}
	for i := 0; w.pending(); i++ {
		fired, err := w.fire()
		switch {
		case err != nil:
			return fmt.Errorf("%d alarms, draining: %w", n, err)
		case !fired:
			return fmt.Errorf("%d alarms, draining: alarms armed and the timer not", n)
		case i > 100000:
			return fmt.Errorf("%d alarms still armed after %d firings", n, i)
		}
	}
	w.s.stop() // waits for the deliverers: every tick sent is in w.ticks now
	if len(w.ticks) > 0 {
		return fmt.Errorf("%d alarms: %d ticks nobody was due", n, len(w.ticks))
	}
	return nil
}

// arm (re)arms alarm i: now, soon, later, or together with another.
func (w *alarmsModel) arm(i int) {
	now := w.clock.Now()
	var at time.Time
	switch w.rng.IntN(4) {
	case 0:
		at = now
	case 1:
		at = now.Add(time.Duration(w.rng.Int64N(int64(30 * time.Millisecond))))
	case 2:
		at = now.Add(time.Duration(w.rng.Int64N(int64(2 * time.Second))))
	default:
		at = now.Add(time.Millisecond)
		if o := w.m[w.rng.IntN(len(w.m))]; o.armed {
			at = o.at
		}
	}
	w.s.arm(w.as[i], at)
	m := &w.m[i]
	m.armed, m.at = true, at
	m.gens++
}

// advance moves the clock on a little, never past the time the timer is
// armed for.
func (w *alarmsModel) advance() {
	to := w.clock.Now().Add(time.Duration(w.rng.Int64N(int64(50 * time.Millisecond))))
	if at, ok := w.clock.Armed(); ok && at.Before(to) {
		to = at
	}
	w.clock.Set(to)
}

// fire moves the clock to the armed time, fires, and checks the ticks: one
// for every alarm due by then, with its current generation, and no other.
// The owner's fired then says true once; now and then the alarm is re-armed
// before, and then fired says false (the tick is stale).
func (w *alarmsModel) fire() (fired bool, err error) {
	now, ok := w.clock.FireAt()
	if !ok {
		return false, nil
	}
	due := map[int]bool{}
	for i, m := range w.m {
		if m.armed && !m.at.After(now) {
			if m.at.Before(now) {
				return true, fmt.Errorf("alarm %d due %v, timer armed %v later", i, m.at, now.Sub(m.at))
			}
			due[i] = true
		}
	}
	w.s.fire()
	// The deliverers pass ticks on in any order: sorted, then shuffled by
	// the seed, so that a seed repeats a run.
	var got []modelTick
	timeout := time.NewTimer(10 * time.Second) // the deliverers pass ticks on at once
	defer timeout.Stop()
	for range due {
		select {
		case tk := <-w.ticks:
			got = append(got, tk)
		case <-timeout.C:
			return true, fmt.Errorf("%d ticks of %d alarms due at %v", len(got), len(due), now)
		}
	}
	slices.SortFunc(got, func(a, b modelTick) int { return cmp.Compare(a.i, b.i) })
	w.rng.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	for _, tk := range got {
		m := &w.m[tk.i]
		switch {
		case !due[tk.i]:
			return true, fmt.Errorf("tick of alarm %d (gen %d) at %v: not due (armed %v for %v), or sent twice", tk.i, tk.gen, now, m.armed, m.at)
		case tk.gen != m.gens:
			return true, fmt.Errorf("tick of alarm %d has gen %d, want %d", tk.i, tk.gen, m.gens)
		}
		delete(due, tk.i)
		if w.rng.IntN(4) == 0 { // re-armed while the tick was on its way
			w.arm(tk.i)
			if w.s.fired(w.as[tk.i], tk.gen) {
				return true, fmt.Errorf("alarm %d: a tick of a replaced arming counts as fired", tk.i)
			}
			continue
		}
		if !w.s.fired(w.as[tk.i], tk.gen) {
			return true, fmt.Errorf("alarm %d: its current tick does not count as fired", tk.i)
		}
		if w.s.fired(w.as[tk.i], tk.gen) {
			return true, fmt.Errorf("alarm %d: fired twice for one tick", tk.i)
		}
		m.armed = false
	}
	return true, nil
}

// check: while any alarm is armed, the timer is, and for no later than the
// first.
func (w *alarmsModel) check() error {
	at, armed := w.clock.Armed()
	for i, m := range w.m {
		if !m.armed {
			continue
		}
		if !armed {
			return fmt.Errorf("alarm %d armed, timer not", i)
		}
		if at.After(m.at) && at.After(w.clock.Now()) {
			return fmt.Errorf("alarm %d due %v, timer armed %v later", i, m.at, at.Sub(m.at))
		}
	}
	return nil
}

func (w *alarmsModel) pending() bool {
	for _, m := range w.m {
		if m.armed {
			return true
		}
	}
	return false
}
