package main

import (
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
	s := checkSafety(ivs, nil, 0)
	if s.Overlaps != 2 {
		t.Fatalf("%d overlaps, want 2 (both holdings inside the long one): %+v", s.Overlaps, s.OverlapSamples)
	}
	if o := s.OverlapSamples[1]; o.WorkerA != 2 || o.WorkerB != 4 || o.Overlap != 10*time.Millisecond {
		t.Errorf("second overlap %+v, want workers 2 and 4 for 10ms", o)
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
	all, queued := handOffs(ivs, 3)
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
