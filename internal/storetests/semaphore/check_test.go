package semaphore_test

import (
	"math"
	"strings"
	"testing"
	"time"
)

// checkedRun is a run the checker passes: survivors take turns on the
// limit slots, the victim takes one and is killed holding it, and the
// survivors hold all slots again once its deadline has passed.
func checkedRun() ([]holding, int64) {
	ms := int64(time.Millisecond)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var hs []holding
	tok := uint64(0)
	grant := func(proc int, at, ended int64) {
		tok++
		hs = append(hs, holding{proc: proc, token: tok, call: at - ms, granted: at, deadline: at + int64(ttl-ttl/10), ended: ended})
	}
	for i := range minGrants + 20 {
		at := base + int64(i/limit)*10*ms + 1*ms
		grant(1+i%limit, at, at+8*ms)
	}
	last := base + int64((minGrants+20)/limit+1)*10*ms
	grant(victim, last, 0)
	killed := last + 5*ms
	after := last + int64(ttl)
	for i := range limit {
		grant(1+i, after+int64(i)*ms, after+10*ms)
	}
	return hs, killed
}

// The checker finds each kind of fault it is there for.
func TestCheckerFindsFaults(t *testing.T) {
	hs, killed := checkedRun()
	if res := check(hs, killed, true); len(res.problems) > 0 {
		t.Fatalf("a good run: %v", res.problems)
	}
	n := len(hs)
	for _, c := range []struct {
		name, want string
		spoil      func(hs []holding) []holding
	}{
		{"a 4th holder", "above the limit", func(hs []holding) []holding {
			h := hs[n-1]
			h.token, h.call, h.granted = hs[n-1].token+1, h.granted, h.granted+int64(time.Millisecond)/2
			return append(hs, h)
		}},
		{"a victim believing past its deadline", "above the limit", func(hs []holding) []holding {
			hs[n-limit-1].deadline += int64(ttl)
			return hs
		}},
		{"a token twice", "granted twice", func(hs []holding) []holding { hs[5].token = hs[4].token; return hs }},
		{"a token below an earlier one", "not above", func(hs []holding) []holding {
			hs[0].token, hs[30].token = hs[30].token, hs[0].token
			return hs
		}},
		{"no takeover", "never held all", func(hs []holding) []holding { return hs[:n-1] }},
		{"the victim holding nothing", "held nothing", func(hs []holding) []holding {
			hs[n-limit-1].ended = killed - int64(time.Millisecond)
			return hs
		}},
		{"too few grants", "fewer than", func(hs []holding) []holding { return hs[minGrants/2:] }},
	} {
		hs, killed := checkedRun()
		res := check(c.spoil(hs), killed, true)
		found := false
		for _, p := range res.problems {
			found = found || strings.Contains(p, c.want)
		}
		if !found {
			t.Errorf("%s: no problem saying %q in %q", c.name, c.want, res.problems)
		}
	}
}

// handedRun is a run whose survivors' grants were all hand-offs, each by a
// release of another process (checkedRun's, each process releasing well
// before its next grant), and the samples of the token counter that bound
// each one's issue within its grantee's wait.
func handedRun() ([]holding, map[uint64]int, []tokenSample) {
	hs, _ := checkedRun()
	us := int64(time.Microsecond)
	handedTo := map[uint64]int{}
	var samples []tokenSample
	for i := range hs {
		h := &hs[i]
		if h.ended != 0 {
			h.how, h.released = "released", h.ended+500*us
		}
		if h.proc != victim {
			handedTo[h.token] = h.proc
		}
		samples = append(samples,
			tokenSample{sent: h.granted - 600*us, got: h.granted - 500*us, token: h.token - 1},
			tokenSample{sent: h.granted - 100*us, got: h.granted - 50*us, token: h.token})
	}
	return hs, handedTo, samples
}

// The hand-off checker finds each kind of fault it is there for.
func TestHandOffCheckFindsFaults(t *testing.T) {
	hs, handedTo, samples := handedRun()
	if res := checkHandOffs(hs, handedTo, samples, 1, math.MaxInt64); len(res.problems) > 0 {
		t.Fatalf("a good run: %v", res.problems)
	}
	for _, c := range []struct {
		name, want string
		notices    int64
		spoil      func(hs []holding, handedTo map[uint64]int)
	}{
		{"no hand-offs", "grants by hand-off", 1, func(_ []holding, handedTo map[uint64]int) { clear(handedTo) }},
		{"a hand-off to another process", "handed off to process", 1, func(hs []holding, handedTo map[uint64]int) {
			handedTo[hs[7].token] = hs[7].proc%(procs-1) + 1
		}},
		{"every hand-off within a release of the grantee's process", "across processes", 1, func(hs []holding, _ map[uint64]int) {
			for i := range hs {
				hs[i].released += int64(5 * time.Millisecond)
			}
		}},
		{"no grant by notice", "notice", 0, func([]holding, map[uint64]int) {}},
	} {
		hs, handedTo, samples := handedRun()
		c.spoil(hs, handedTo)
		res := checkHandOffs(hs, handedTo, samples, c.notices, math.MaxInt64)
		found := false
		for _, p := range res.problems {
			found = found || strings.Contains(p, c.want)
		}
		if !found {
			t.Errorf("%s: no problem saying %q in %q", c.name, c.want, res.problems)
		}
	}
}
