package main

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestCheckSafety(t *testing.T) {
	ms := int64(time.Millisecond)
	ivs := []interval{
		{Key: 0, Worker: 0, Token: 1, Call: 0, Start: 0, End: 10 * ms},
		{Key: 0, Worker: 1, Token: 2, Call: 1 * ms, Start: 10 * ms, End: 12 * ms}, // touches, no overlap
		{Key: 0, Worker: 2, Token: 3, Call: 0, Start: 20 * ms, End: 50 * ms},      // long holding
		{Key: 0, Worker: 3, Token: 4, Call: 0, Start: 30 * ms, End: 35 * ms},      // inside it
		{Key: 0, Worker: 4, Token: 5, Call: 0, Start: 40 * ms, End: 60 * ms},      // after the inner one, still inside the long one
		{Key: 1, Worker: 5, Token: 1, Call: 0, Start: 30 * ms, End: 40 * ms},      // another name: no conflict
	}
	s := checkSafety(ivs, nil, 0, 1)
	if s.Overlaps != 2 {
		t.Fatalf("%d overlaps, want 2 (both holdings inside the long one): %+v", s.Overlaps, s.OverlapSamples)
	}
	if o := s.OverlapSamples[1]; o.WorkerA != 2 || o.WorkerB != 4 || o.Overlap != 10*time.Millisecond {
		t.Errorf("second overlap %+v, want workers 2 and 4 for 10ms", o)
	}
}

// With a limit of n, n holdings of a name live at once are fine; a holding
// that begins while n are live is flagged, and one that begins as another
// ends is not.
func TestCheckSafetyLimit(t *testing.T) {
	ms := int64(time.Millisecond)
	const n = 3
	full := []interval{ // three at once, a fourth as the first ends
		{Key: 0, Worker: 0, Token: 1, Start: 0, End: 10 * ms},
		{Key: 0, Worker: 1, Token: 2, Start: 1 * ms, End: 20 * ms},
		{Key: 0, Worker: 2, Token: 3, Start: 2 * ms, End: 20 * ms},
		{Key: 0, Worker: 3, Token: 4, Start: 10 * ms, End: 15 * ms},
		{Key: 1, Worker: 4, Token: 1, Start: 5 * ms, End: 6 * ms}, // another name
	}
	if s := checkSafety(full, nil, 0, n); s.Overlaps != 0 || s.Rejections != 0 {
		t.Fatalf("%d holdings of a limit of %d flagged: %+v", n, n, s)
	}
	over := append(slices.Clone(full),
		interval{Key: 0, Worker: 4, Token: 5, Start: 12 * ms, End: 30 * ms}) // the fourth at once, from 12 to 15
	s := checkSafety(over, nil, 0, n)
	if s.Overlaps != 1 {
		t.Fatalf("%d overlaps, want 1 (n+1 live from 12 to 15ms): %+v", s.Overlaps, s.OverlapSamples)
	}
	if o := s.OverlapSamples[0]; o.WorkerB != 4 || o.WorkerA != 1 || o.Overlap != 3*time.Millisecond {
		t.Errorf("overlap %+v, want worker 4 beside worker 1's (the last to end) for 3ms", o)
	}
	if s := checkSafety(over, nil, 0, n+1); s.Overlaps != 0 {
		t.Errorf("limit %d: %d overlaps, want 0", n+1, s.Overlaps)
	}
	if s := checkSafety(full, nil, 0, 1); s.Overlaps != 3 {
		t.Errorf("limit 1: %d overlaps, want 3", s.Overlaps)
	}
}

// Above a limit of 1, tokens must increase in the order of the grants where
// the holders' clock shows that order, and be distinct; grants whose
// acquires overlapped may return in either order.
func TestTokenOrder(t *testing.T) {
	ms := int64(time.Millisecond)
	ok := []interval{
		{Key: 0, Worker: 0, Token: 2, Call: 0, Start: 5 * ms, End: 9 * ms},
		{Key: 0, Worker: 1, Token: 1, Call: 1 * ms, Start: 4 * ms, End: 8 * ms}, // granted first, returned first
		{Key: 0, Worker: 2, Token: 3, Call: 5 * ms, Start: 8 * ms, End: 9 * ms}, // asked as token 2 returned
	}
	if s := checkSafety(ok, nil, 0, 2); s.Rejections != 0 || s.Overlaps != 0 {
		t.Fatalf("legitimate tokens flagged: %+v", s)
	}
	bad := append(slices.Clone(ok),
		interval{Key: 0, Worker: 0, Token: 2, Call: 10 * ms, Start: 11 * ms, End: 12 * ms}, // not above 3, and a repeat
		interval{Key: 0, Worker: 1, Token: 9, Call: 9 * ms, Start: 13 * ms, End: 14 * ms},
		interval{Key: 0, Worker: 2, Token: 9, Call: 9 * ms, Start: 13 * ms, End: 14 * ms}, // 9 twice, asked at once
	)
	s := checkSafety(bad, nil, 0, 2)
	if s.Rejections != 4 || s.FencedHoldings != 4 {
		t.Fatalf("%d token violations in %d holdings, want 4 (token 2 twice, 9 twice): %+v", s.Rejections, s.FencedHoldings, s.RejectSamples)
	}
	var late fenceRejection
	for _, r := range s.RejectSamples {
		if r.At == 11*ms {
			late = r
		}
	}
	if late.Token != 2 || late.Highest != 3 {
		t.Errorf("the late token 2: %+v, want highest 3", late)
	}
	// A limit of 1 leaves tokens to the shared record.
	if s := checkSafety(bad, nil, 0, 1); s.Rejections != 0 {
		t.Errorf("limit 1: %d token violations from the intervals, want none", s.Rejections)
	}
}

// Utilisation is the time-averaged number of holdings ÷ the limit, name by
// name, clipped to the run.
func TestUtilisation(t *testing.T) {
	ms := int64(time.Millisecond)
	ivs := []interval{
		{Key: 0, Start: 0, End: 50 * ms},
		{Key: 0, Start: 0, End: 100 * ms},
		{Key: 1, Start: 90 * ms, End: 120 * ms}, // 10ms inside the run
		{Key: 5, Start: 0, End: 100 * ms},       // past the names asked for
	}
	got := utilisation(ivs, 3, 2, 0, 100*ms)
	want := []float64{0.75, 0.05, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("utilisation %v, want %v", got, want)
			break
		}
	}
	if got := utilisation(ivs, 1, 1, 0, 100*ms); got[0] != 1.5 {
		t.Errorf("limit 1: %v, want 1.5 (two holders at once count twice)", got)
	}
}

// A release of a full name's slot while a contender waits hands off to the
// next grant; one of a name with a slot free does not.
func TestSlotHandOffs(t *testing.T) {
	ms := int64(time.Millisecond)
	ivs := []interval{
		{Key: 0, Worker: 0, Call: 0, Start: 0, End: 10 * ms},
		{Key: 0, Worker: 1, Call: 0, Start: 1 * ms, End: 20 * ms},
		{Key: 0, Worker: 2, Call: 0, Start: 11 * ms, End: 30 * ms},       // full, waiting since 0: 1ms, queued
		{Key: 0, Worker: 0, Call: 12 * ms, Start: 22 * ms, End: 25 * ms}, // worker 1's slot: 2ms
		{Key: 0, Worker: 1, Call: 28 * ms, Start: 41 * ms, End: 42 * ms}, // asked at 28; at 30 a slot was free
	}
	all, queued := handOffs(ivs, 3, 2)
	if want := []time.Duration{time.Millisecond, 2 * time.Millisecond}; !slices.Equal(all, want) {
		t.Errorf("hand-offs %v, want %v", all, want)
	}
	if want := []time.Duration{time.Millisecond}; !slices.Equal(queued, want) {
		t.Errorf("queued hand-offs %v, want %v", queued, want)
	}

	// Two slots freed one after the other, the first still on its way to a
	// waiter when the second is freed: each goes to the next grant in turn.
	ivs = []interval{
		{Key: 0, Worker: 0, Call: 0, Start: 0, End: 10 * ms},
		{Key: 0, Worker: 1, Call: 0, Start: 0, End: 11 * ms},
		{Key: 0, Worker: 2, Call: 1 * ms, Start: 12 * ms, End: 20 * ms},
		{Key: 0, Worker: 3, Call: 1 * ms, Start: 13 * ms, End: 20 * ms},
	}
	all, _ = handOffs(ivs, 4, 2)
	if want := []time.Duration{2 * time.Millisecond, 2 * time.Millisecond}; !slices.Equal(all, want) {
		t.Errorf("hand-offs %v, want %v", all, want)
	}
}

func TestHandOffs(t *testing.T) {
	ms := int64(time.Millisecond)
	ivs := []interval{
		{Key: 0, Worker: 0, Call: 0, Start: 2 * ms, End: 10 * ms},
		{Key: 0, Worker: 1, Call: 1 * ms, Start: 11 * ms, End: 20 * ms},     // queued waiter: 1ms
		{Key: 0, Worker: 0, Call: 19 * ms, Start: 23 * ms, End: 30 * ms},    // asked while held: 3ms, not queued
		{Key: 0, Worker: 0, Call: 34 * ms, Start: 35 * ms, End: 40 * ms},    // the releaser again while worker 1 waits: 5ms
		{Key: 0, Worker: 1, Call: 25 * ms, Start: 41 * ms, End: 42 * ms},    // worker 1 at last: 1ms, queued since before 35
		{Key: 0, Worker: 2, Call: 100 * ms, Start: 100 * ms, End: 101 * ms}, // idle name: no hand-off
	}
	all, queued := handOffs(ivs, 3, 1)
	want := []time.Duration{time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond, time.Millisecond}
	if !slices.Equal(all, want) {
		t.Errorf("hand-offs %v, want %v", all, want)
	}
	if wantQ := []time.Duration{time.Millisecond, time.Millisecond}; !slices.Equal(queued, wantQ) {
		t.Errorf("queued hand-offs %v, want %v", queued, wantQ)
	}
}

func TestJain(t *testing.T) {
	if f := jain([]float64{5, 5, 5, 5}); f.Jain != 1 || f.MinShare != 1 || f.MaxShare != 1 {
		t.Errorf("even shares: %+v", f)
	}
	if f := jain([]float64{8, 0, 0, 0}); f.Jain != 0.25 || f.MinShare != 0 || f.MaxShare != 4 {
		t.Errorf("one takes all: %+v", f)
	}
}

func TestSummarise(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarise(ds)
	if l.N != 100 || l.P50 < 49 || l.P50 > 51 || l.P99 < 98 || l.Max != 100 {
		t.Errorf("%+v", l)
	}
}

// Two mappings of the record file (as two processes have) see each other's
// writes, and a lower token is refused.
func TestSharedRecordFence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec")
	if err := createRecord(path, 2, 1); err != nil {
		t.Fatal(err)
	}
	a, err := openRecord(path, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := openRecord(path, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if ok, _ := a.fence(1, 7); !ok {
		t.Fatal("first write refused")
	}
	if ok, _ := b.fence(1, 7); !ok {
		t.Error("the same token written again was refused")
	}
	if ok, highest := b.fence(1, 6); ok || highest != 7 {
		t.Errorf("a lower token was accepted (ok %v, highest %d)", ok, highest)
	}
	if ok, _ := b.fence(0, 1); !ok {
		t.Error("names share a slot")
	}
	a.addProgress(0)
	a.holdingNow(0, 1)
	if b.progress() != 1 || len(b.holders()) != 1 {
		t.Errorf("progress %d, holders %v", b.progress(), b.holders())
	}
}

func TestKeyPickers(t *testing.T) {
	base := runConfig{Keys: 10, ZipfS: 1.2}
	for _, dist := range []string{"hot", "uniform", "zipf"} {
		c := base
		c.Dist = dist
		pick := newKeyPicker(c, 1)
		seen := map[int]int{}
		for range 2000 {
			k := pick()
			if k < 0 || k >= c.Keys {
				t.Fatalf("%s picked %d", dist, k)
			}
			seen[k]++
		}
		switch dist {
		case "hot":
			if len(seen) != 1 || seen[0] != 2000 {
				t.Errorf("hot: %v", seen)
			}
		case "uniform":
			if len(seen) != 10 {
				t.Errorf("uniform: %v", seen)
			}
		case "zipf":
			if seen[0] <= seen[9]*3 {
				t.Errorf("zipf does not favour name 0: %v", seen)
			}
		}
	}
}
