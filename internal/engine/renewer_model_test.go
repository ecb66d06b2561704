package engine

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/clock/clocktest"
	"github.com/leasehold/leasehold/internal/lease"
)

// TestRenewerModel runs random sequences of schedule, move (schedule again),
// cancel and fire on a fake clock against a plain model of what the renewer
// promises, firing whenever its timer is armed for: every scheduled renewal
// is sent exactly once unless cancelled first, never before its early bound,
// never after its due time; batches hold at most size renewals; cancel
// reports a renewal sent, and when. LEASEHOLD_MODEL_LONG=1 runs it long.
func TestRenewerModel(t *testing.T) {
	sequences, steps := modelRuns()
	for seed := range uint64(sequences) {
		if err := runRenewerModel(seed, steps); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// modelRenewal is the model of one renewal: scheduled (due, early) or not,
// and when it was sent (zero: not since it was last scheduled).
type modelRenewal struct {
	scheduled  bool
	seq        uint64
	due, early time.Time
	sent       time.Time
}

type renewerModel struct {
	rng    *rand.Rand
	clock  *clocktest.Fake
	r      *renewer
	size   int
	window time.Duration // what the renewer must cap slack at

	ns   []*renewal
	m    []modelRenewal
	seq  uint64
	sent map[uint64]bool // every seq ever sent

	mu  sync.Mutex
	got [][]sentRenewal // batches posted since the last fire
}

func runRenewerModel(seed uint64, steps int) (err error) {
	rng := rand.New(rand.NewPCG(seed, 26))
	sizes := []int{1, 2, 3, 5, DefaultRenewBatchSize}
	windows := []time.Duration{0, time.Millisecond, 20 * time.Millisecond, 300 * time.Millisecond}
	w := &renewerModel{rng: rng, clock: clocktest.New(), size: sizes[rng.IntN(len(sizes))], sent: map[uint64]bool{}}
	window := windows[rng.IntN(len(windows))]
	switch {
	case w.size == 1:
		w.window = 0
	case window == 0:
		w.window = DefaultRenewBatchDelay
	default:
		w.window = window
	}
	w.r = newRenewer(w.clock, w.size, window, func(b []sentRenewal) {
		w.mu.Lock()
		w.got = append(w.got, b)
		w.mu.Unlock()
	}, nil, nil)
	defer w.r.stop()
	n := 1 + rng.IntN(40)
	for range n {
		w.ns = append(w.ns, &renewal{pos: -1, Holding: &lease.Holding{}})
	}
	w.m = make([]modelRenewal, n)
	defer func() {
		if err != nil {
			err = fmt.Errorf("size %d, window %v, %d renewals: %w", w.size, w.window, n, err)
		}
	}()
	for step := range steps {
		var err error
		switch op := rng.IntN(10); {
		case op < 4:
			w.schedule(rng.IntN(n))
		case op < 6:
			err = w.cancel(rng.IntN(n))
		case op < 7:
			w.churn(1 + rng.IntN(80))
		case op < 8:
			w.advance()
		default:
			_, err = w.fire()
		}
		if err == nil {
			err = w.check()
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	// Whatever is still scheduled goes, each once, by its due time.
	for i := 0; w.pending(); i++ {
		if i > 100000 {
			return fmt.Errorf("renewals still scheduled after %d firings", i)
		}
		fired, err := w.fire()
		if err == nil && !fired {
			err = fmt.Errorf("renewals scheduled and the timer not armed")
		}
		if err != nil {
			return fmt.Errorf("draining: %w", err)
		}
	}
	return nil
}

// schedule schedules renewal i (a move when it is scheduled already): due
// now, soon, later, or with another renewal (in its slot), with or without
// slack.
func (w *renewerModel) schedule(i int) {
	now := w.clock.Now()
	var due time.Time
	switch w.rng.IntN(4) {
	case 0:
		due = now
	case 1:
		due = now.Add(time.Duration(w.rng.Int64N(int64(30 * time.Millisecond))))
	case 2:
		due = now.Add(time.Duration(w.rng.Int64N(int64(2 * time.Second))))
	default:
		o := w.m[w.rng.IntN(len(w.m))]
		due = now.Add(time.Duration(w.rng.Int64N(int64(slotWidth))))
		if o.scheduled {
			due = o.due
		}
	}
	var slack time.Duration
	if w.rng.IntN(2) == 0 {
		slack = time.Duration(w.rng.Int64N(int64(400 * time.Millisecond)))
	}
	w.seq++
	w.ns[i].Call = renewCall{Seq: w.seq}
	w.r.schedule(w.ns[i], due, slack)
	w.m[i] = modelRenewal{scheduled: true, seq: w.seq, due: due, early: due.Add(-min(slack, w.window))}
}

// cancel takes renewal i back and checks what cancel says against the model.
func (w *renewerModel) cancel(i int) error {
	sent, wasSent := w.r.cancel(w.ns[i])
	m := &w.m[i]
	if m.scheduled {
		m.scheduled = false
		if wasSent || !sent.IsZero() {
			return fmt.Errorf("cancel of scheduled renewal %d (seq %d) = %v, %v; want not sent", i, m.seq, sent, wasSent)
		}
		return nil
	}
	if wasSent != !m.sent.IsZero() || !sent.Equal(m.sent) {
		return fmt.Errorf("cancel of renewal %d (seq %d) = %v, %v; want %v, %v", i, m.seq, sent, wasSent, m.sent, !m.sent.IsZero())
	}
	return nil
}

// churn schedules and cancels a renewal of its own k times, each in a slot
// far out: leases taken and released before their first renewal. Their
// stale slots pile up and set off compactions.
func (w *renewerModel) churn(k int) {
	n := &renewal{pos: -1, Holding: &lease.Holding{}}
	for range k {
		w.seq++
		n.Call = renewCall{Seq: w.seq}
		w.r.schedule(n, w.clock.Now().Add(time.Hour+time.Duration(w.rng.Int64N(int64(time.Hour)))), 0)
		w.r.cancel(n)
	}
}

// advance moves the clock on a little, never past the time the timer is
// armed for (then fire is due).
func (w *renewerModel) advance() {
	to := w.clock.Now().Add(time.Duration(w.rng.Int64N(int64(50 * time.Millisecond))))
	if at, ok := w.clock.Armed(); ok && at.Before(to) {
		to = at
	}
	w.clock.Set(to)
}

// fire moves the clock to the armed time, fires, and checks what was sent:
// every renewal due by then, none before its early bound, each once, in
// batches of at most size.
func (w *renewerModel) fire() (fired bool, err error) {
	now, ok := w.clock.FireAt()
	if !ok {
		return false, nil
	}
	bySeq := map[uint64]int{}
	for i, m := range w.m {
		if m.scheduled {
			bySeq[m.seq] = i
			if m.due.Before(now) {
				return true, fmt.Errorf("renewal %d (seq %d) due %v, timer armed %v later", i, m.seq, m.due, now.Sub(m.due))
			}
		}
	}
	w.r.fire()
	w.mu.Lock()
	got := w.got
	w.got = nil
	w.mu.Unlock()
	for _, b := range got {
		if len(b) == 0 || len(b) > w.size {
			return true, fmt.Errorf("a batch of %d renewals, size %d", len(b), w.size)
		}
		for _, c := range b {
			i, ok := bySeq[c.Seq]
			switch {
			case w.sent[c.Seq]:
				return true, fmt.Errorf("seq %d sent twice", c.Seq)
			case !ok:
				return true, fmt.Errorf("seq %d sent, but it is not scheduled", c.Seq)
			case w.m[i].early.After(now):
				return true, fmt.Errorf("renewal %d (seq %d) sent at %v, %v before its early bound", i, c.Seq, now, w.m[i].early.Sub(now))
			}
			w.sent[c.Seq] = true
			w.m[i].scheduled, w.m[i].sent = false, now
			if s := w.r.sentAt(w.ns[i]); !s.Equal(now) {
				return true, fmt.Errorf("renewal %d sent at %v, sentAt says %v", i, now, s)
			}
		}
	}
	for i, m := range w.m {
		if m.scheduled && !m.due.After(now) {
			return true, fmt.Errorf("renewal %d (seq %d) due %v not sent by a firing at %v", i, m.seq, m.due, now)
		}
	}
	return true, nil
}

// check: while anything is scheduled, the timer is armed, and for no later
// than the first due time.
func (w *renewerModel) check() error {
	at, armed := w.clock.Armed()
	for i, m := range w.m {
		if !m.scheduled {
			continue
		}
		if !armed {
			return fmt.Errorf("renewal %d (seq %d) scheduled, timer not armed", i, m.seq)
		}
		if at.After(m.due) && at.After(w.clock.Now()) {
			return fmt.Errorf("renewal %d (seq %d) due %v, timer armed %v later", i, m.seq, m.due, at.Sub(m.due))
		}
	}
	return nil
}

func (w *renewerModel) pending() bool {
	for _, m := range w.m {
		if m.scheduled {
			return true
		}
	}
	return false
}
