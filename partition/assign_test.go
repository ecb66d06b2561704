package partition

import (
	"fmt"
	"slices"
	"testing"
)

// Shares add up to the items and differ by at most one, the larger ones at
// the lower ranks.
func TestQuota(t *testing.T) {
	for n := 0; n <= 60; n++ {
		for members := 1; members <= 13; members++ {
			sum, lo, hi := 0, n, 0
			for r := range members {
				q := quota(n, members, r)
				sum += q
				lo, hi = min(lo, q), max(hi, q)
				if r > 0 && q > quota(n, members, r-1) {
					t.Errorf("quota(%d, %d, %d) = %d above rank %d's", n, members, r, q, r-1)
				}
			}
			if sum != n || hi-lo > 1 {
				t.Errorf("%d items, %d members: shares add to %d, spread %d–%d", n, members, sum, lo, hi)
			}
		}
	}
	if q := quota(10, 3, 3); q != 0 {
		t.Errorf("quota of a rank outside the members = %d", q)
	}
}

// The moves a join costs under the rule the members follow (only surplus is
// handed back, only free items are taken): the newcomer's share, plus one
// for each member whose rank-given extra item passes to another. At most
// ⌈N/(M+1)⌉ + N mod (M+1); exactly N/(M+1) when it divides.
func TestJoinMoves(t *testing.T) {
	for _, n := range []int{7, 13, 100, 1000} {
		for m := 1; m <= 12; m++ {
			for at := 0; at <= m; at++ { // the newcomer's rank
				moves := 0
				for r := range m {
					newRank := r
					if r >= at {
						newRank++
					}
					moves += max(0, quota(n, m, r)-quota(n, m+1, newRank))
				}
				bound := (n+m)/(m+1) + n%(m+1)
				if moves > bound || moves < n/(m+1) {
					t.Errorf("%d items, %d members, newcomer at rank %d: %d moves, outside [%d, %d]", n, m, at, moves, n/(m+1), bound)
				}
				if n%(m+1) == 0 && moves != n/(m+1) {
					t.Errorf("%d items, %d → %d members: %d moves, want exactly %d", n, m, m+1, moves, n/(m+1))
				}
			}
		}
	}
}

func TestByPreference(t *testing.T) {
	items := make([]string, 100)
	for i := range items {
		items[i] = fmt.Sprint("item-", i)
	}
	a, b := slices.Clone(items), slices.Clone(items)
	byPreference("member-a", a)
	byPreference("member-a", b)
	if !slices.Equal(a, b) {
		t.Error("byPreference is not deterministic")
	}
	c := slices.Clone(items)
	byPreference("member-b", c)
	// Two members' first choices mostly differ: that is what keeps members
	// taking free items at once from reaching for the same ones.
	common := 0
	for _, it := range a[:10] {
		if slices.Contains(c[:10], it) {
			common++
		}
	}
	if common > 5 {
		t.Errorf("member-a and member-b share %d of their 10 first choices", common)
	}
	slices.Sort(a)
	if !slices.Equal(a, sorted(items)) {
		t.Error("byPreference lost or added items")
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestDigest(t *testing.T) {
	if digest([]string{"a", "b"}) == digest([]string{"ab"}) {
		t.Error("digest confuses [a b] with [ab]")
	}
	if digest([]string{"a", "b"}) != digest([]string{"a", "b"}) {
		t.Error("digest is not deterministic")
	}
}
