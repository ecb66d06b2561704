package backoff

import (
	"math"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCeilingDoublesToTheCap(t *testing.T) {
	p := Policy{Base: 10 * time.Millisecond, Cap: 80 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 80, 80, 80}
	for n, w := range want {
		if got := p.Ceiling(n); got != w*time.Millisecond {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
	if got := p.Ceiling(-3); got != p.Base {
		t.Errorf("Ceiling(-3) = %v, want Base", got)
	}
}

// TestCeilingDoesNotOverflow: whatever the attempt number, the ceiling stays
// within (0, Cap], also for the largest durations.
func TestCeilingDoesNotOverflow(t *testing.T) {
	policies := []Policy{
		{Base: time.Nanosecond, Cap: time.Second},
		{Base: 5 * time.Millisecond, Cap: 500 * time.Millisecond},
		{Base: time.Second, Cap: math.MaxInt64},
		{Base: math.MaxInt64, Cap: math.MaxInt64},
		{Base: 3, Cap: math.MaxInt64 - 1},
	}
	for _, p := range policies {
		prev := time.Duration(0)
		for _, n := range []int{0, 1, 2, 29, 30, 31, 32, 33, 61, 62, 63, 64, 65, 100, 1000, math.MaxInt} {
			c := p.Ceiling(n)
			if c <= 0 || c > p.Cap || c < prev {
				t.Fatalf("%+v: Ceiling(%d) = %v after %v, want non-decreasing within (0, %v]", p, n, c, prev, p.Cap)
			}
			prev = c
		}
		if c := p.Ceiling(math.MaxInt); c != p.Cap {
			t.Errorf("%+v: Ceiling(MaxInt) = %v, want the cap", p, c)
		}
	}
}

// TestDelayBounds: every draw of every kind stays within its documented
// bounds below the ceiling.
func TestDelayBounds(t *testing.T) {
	bounds := map[Jitter]func(c time.Duration) (lo, hi time.Duration){
		NoJitter:   func(c time.Duration) (time.Duration, time.Duration) { return c, c },
		FullJitter: func(c time.Duration) (time.Duration, time.Duration) { return 1, c },
		HalfJitter: func(c time.Duration) (time.Duration, time.Duration) { return c / 2, c - 1 },
	}
	for j, bound := range bounds {
		for _, p := range []Policy{
			{Base: 2 * time.Millisecond, Cap: 250 * time.Millisecond, Jitter: j},
			{Base: 3, Cap: 7, Jitter: j},
			{Base: time.Second, Cap: math.MaxInt64, Jitter: j},
		} {
			for _, n := range []int{0, 1, 5, 10, 40, 64, 1 << 20} {
				c := p.Ceiling(n)
				lo, hi := bound(c)
				seen := map[time.Duration]bool{}
				for range 200 {
					d := p.Delay(n)
					if d < lo || d > hi {
						t.Fatalf("jitter %d %+v: Delay(%d) = %v, want within [%v, %v]", j, p, n, d, lo, hi)
					}
					seen[d] = true
				}
				if j != NoJitter && hi-lo > 100 && len(seen) < 2 {
					t.Errorf("jitter %d %+v: Delay(%d) is not jittered", j, p, n)
				}
			}
		}
	}
}

// TestApplyOnTinyDelays: delays too small to randomise come back unchanged
// (never a panic of rand.N, never a negative or zero pause from a positive
// one).
func TestApplyOnTinyDelays(t *testing.T) {
	for _, j := range []Jitter{NoJitter, FullJitter, HalfJitter} {
		for _, d := range []time.Duration{-1, 0, 1} {
			if got := j.Apply(d); got != d {
				t.Errorf("jitter %d: Apply(%v) = %v, want it unchanged", j, d, got)
			}
		}
		for range 100 {
			if got := j.Apply(2); got < 1 || got > 2 {
				t.Fatalf("jitter %d: Apply(2ns) = %v", j, got)
			}
		}
	}
}
