package partition

import (
	"cmp"
	"slices"
)

// quota is the fair share of the member at rank (from 0) among members
// members for n items: ⌈n/members⌉ for the first n mod members ranks and
// ⌊n/members⌋ for the others, so that shares differ by at most one and add
// up to n. Every member computes it from the same sorted member list, so the
// members agree on every share without talking.
func quota(n, members, rank int) int {
	if members <= 0 || rank < 0 || rank >= members {
		return 0
	}
	q := n / members
	if rank < n%members {
		q++
	}
	return q
}

// score is member's rendezvous weight for item: a member takes the free
// items it weighs most and hands back those it weighs least. Members weigh
// items independently, so members taking free items at the same time mostly
// reach for different ones.
func score(member, item string) uint64 {
	// FNV-1a over member, NUL, item, then the splitmix64 finalizer: FNV
	// alone spreads the low bits of similar names poorly.
	h := uint64(14695981039346656037)
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
	}
	add(member)
	add("\x00")
	add(item)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// byPreference sorts items in place, the ones member weighs most first (ties,
// which need equal hashes, by name).
func byPreference(member string, items []string) {
	slices.SortFunc(items, func(a, b string) int {
		if c := cmp.Compare(score(member, b), score(member, a)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}
