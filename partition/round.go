package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/backoff"
)

// run is the member's own goroutine: a round now, then one every rebalance
// period (a quarter of it while below its share, and settleEvery at most
// while settling), until the member leaves or cannot go on; then it leaves.
func (mem *Member) run() {
	defer close(mem.done)
	defer mem.cancel()
	for first := true; ; first = false {
		short, err := mem.round()
		if err != nil {
			mem.err = err
			mem.log.Warn("partition: the member stops", "err", err)
			break
		}
		if first { // Join returns the member only after a good first round
			close(mem.joined)
		}
		wait := mem.cfg.rebalance
		if short {
			wait = max(wait/4, time.Millisecond)
		}
		if mem.settling > 0 {
			mem.settling--
			wait = min(wait, settleEvery)
		}
		if backoff.Sleep(mem.ctx, wait) != nil {
			break
		}
	}
	mem.leave()
}

// settleRounds is how many rounds a member runs at the settling pace after it
// joins or sees the members change: members that start together, and a
// joiner with the members already there, agree on their shares within a few
// of them rather than within a rebalance period each.
const settleRounds = 8

// settleEvery is the most a settling member waits between rounds.
const settleEvery = 250 * time.Millisecond

// round looks at the group once and moves towards the member's share. short
// reports that the member stays below its share (no free item to take yet);
// err is what the member cannot go on after.
func (mem *Member) round() (short bool, err error) {
	mem.rounds.Add(1)
	if member, err := mem.rejoin(); !member {
		return false, err
	}
	members, err := mem.liveMembers(mem.ctx, false)
	if err != nil {
		if mem.ctx.Err() == nil {
			mem.log.Warn("partition: cannot list the members; trying again next round", "err", err)
		}
		return false, nil
	}
	mem.saw(members)
	share := mem.share(members)

	active := mem.active()
	switch {
	case len(active) > share:
		byPreference(mem.m.Owner(), active)
		mem.handBack(active[share:], moveHandedBack)
		return false, nil
	case len(active) == share:
		return false, nil
	}
	free, err := mem.freeItems()
	if err != nil {
		if mem.ctx.Err() == nil {
			mem.log.Warn("partition: cannot list the items; trying again next round", "err", err)
		}
		return true, nil
	}
	if mem.settling > 0 {
		// Members starting together may not have seen each other yet: look
		// again just before taking, so as not to take what is theirs.
		if again, err := mem.liveMembers(mem.ctx, false); err == nil {
			mem.saw(again)
			share = min(share, mem.share(again))
		}
		if len(active) >= share {
			return false, nil
		}
	}
	byPreference(mem.m.Owner(), free)
	taken, err := mem.take(free, share-len(active))
	return len(active)+taken < share, err
}

// saw records the members a round found; when they changed, the member
// settles again (see settleRounds).
func (mem *Member) saw(members []string) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.members != nil && !slices.Equal(mem.members, members) {
		mem.settling = settleRounds
	}
	mem.members = members
}

// share is the member's fair share of the items among members.
func (mem *Member) share(members []string) int {
	rank, _ := slices.BinarySearch(members, mem.m.Owner())
	return quota(len(mem.items), len(members), rank)
}

// rejoin makes sure the member holds its membership lease, acquiring it again
// when it was lost (a store failure, a revocation). Until it holds it again
// the member keeps what it owns and takes nothing.
func (mem *Member) rejoin() (member bool, err error) {
	if mem.membership.Err() == nil {
		return true, nil
	}
	l, err := mem.m.Acquire(mem.ctx, memberLease(mem.group, mem.m.Owner()),
		leasehold.WithTTL(mem.cfg.ttl), leasehold.WithMetadata(mem.meta))
	switch {
	case err == nil:
		mem.membership, mem.rejoining = l, false
		mem.log.Info("partition: joined again after the membership lease ended")
		return true, nil
	case fatal(err):
		return false, err
	case !mem.rejoining && mem.ctx.Err() == nil: // once per outage, not every round
		mem.rejoining = true
		mem.log.Warn("partition: the membership lease ended and cannot be taken again yet; trying every round", "err", err)
	}
	return false, nil
}

// liveMembers lists the owners of the group's live members that have the
// same item set as this one, sorted. A member with another item set is an
// ErrItemSetMismatch when strict (Join), else it is left out (and logged
// once): its shares cannot be agreed with. A lease of this member's own
// owner never counts as a mismatch: it is this member, or the previous
// process of its owner, whose lease this one replaces.
func (mem *Member) liveMembers(ctx context.Context, strict bool) ([]string, error) {
	ls, err := mem.m.List(ctx, mem.group+membersDir)
	if err != nil {
		return nil, fmt.Errorf("partition: group %q: list the members: %w", mem.group, err)
	}
	var out []string
	for _, l := range ls {
		mm, ok := parseMember(mem.group, l.Metadata)
		switch {
		case !ok, l.Owner == mem.m.Owner():
			continue
		case mm.Digest != mem.digest && strict:
			return nil, fmt.Errorf("%w: group %q: member %q has %d items (digest %s), this one %d (digest %s)",
				ErrItemSetMismatch, mem.group, l.Owner, mm.Items, mm.Digest, len(mem.items), mem.digest)
		case mm.Digest != mem.digest:
			if !mem.warned[l.Owner] {
				mem.warned[l.Owner] = true
				mem.log.Warn("partition: a member with another item set is left out of the shares",
					"other", l.Owner, "its_items", mm.Items, "items", len(mem.items))
			}
			continue
		}
		out = append(out, l.Owner)
	}
	out = append(out, mem.m.Owner())
	slices.Sort(out)
	return slices.Compact(out), nil
}

// freeItems lists the items nobody holds now (as far as the store says) and
// this member has no holding of, in name order.
func (mem *Member) freeItems() ([]string, error) {
	ls, err := mem.m.List(mem.ctx, mem.group+itemsDir)
	if err != nil {
		return nil, fmt.Errorf("partition: group %q: list the items: %w", mem.group, err)
	}
	held := make(map[string]bool, len(ls))
	for _, l := range ls {
		if item, ok := parseItem(mem.group, l.Metadata); ok {
			held[item] = true
		} else { // someone else's lease under the item's name still holds it
			held[strings.TrimPrefix(l.Name, mem.group+itemsDir)] = true
		}
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	var free []string
	for _, it := range mem.items {
		if !held[it] && mem.held[it] == nil {
			free = append(free, it)
		}
	}
	return free, nil
}

// takeAtOnce bounds the acquires in flight: the engine sends those ready
// together to the store in one round trip.
const takeAtOnce = 32

// take acquires up to want of the candidates, in order, with one attempt
// each (another member may take one first), and starts owning each it gets.
// It stops at the first backend failure (the next round tries again), and
// returns how many it took and an error only when the member cannot go on.
func (mem *Member) take(candidates []string, want int) (taken int, err error) {
	type result struct {
		lease *leasehold.Lease
		err   error
	}
	for len(candidates) > 0 && taken < want && mem.ctx.Err() == nil {
		batch := candidates[:min(want-taken, takeAtOnce, len(candidates))]
		candidates = candidates[len(batch):]
		results := make([]result, len(batch))
		var wg sync.WaitGroup
		for i, item := range batch {
			wg.Go(func() {
				results[i].lease, results[i].err = mem.m.Acquire(mem.ctx, itemLease(mem.group, item),
					leasehold.WithTTL(mem.cfg.ttl), leasehold.WithMetadata(encode(itemMeta{metaVersion, mem.group, item})))
			})
		}
		wg.Wait()
		var failed error
		for i, r := range results {
			switch {
			case r.err == nil:
				mem.own(batch[i], r.lease)
				taken++
			case errors.Is(r.err, leasehold.ErrNotAcquired), mem.ctx.Err() != nil:
			case fatal(r.err):
				err = r.err
			default:
				failed = r.err
			}
		}
		if err != nil {
			return taken, err
		}
		if failed != nil {
			mem.log.Warn("partition: cannot acquire items; trying again next round", "err", failed)
			return taken, nil
		}
	}
	return taken, nil
}

// active lists the items the member owns and is not handing back.
func (mem *Member) active() []string {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	var out []string
	for item, h := range mem.held {
		if !h.handingBack && h.lease.Err() == nil {
			out = append(out, item)
		}
	}
	return out
}

// leave releases the membership first, so that the others raise their
// shares at their next look and take the items as they come free, then
// hands every item back and waits for every holding to end.
func (mem *Member) leave() {
	release(mem.ctx, mem.membership)
	mem.mu.Lock()
	var all []string
	for item, h := range mem.held {
		if !h.handingBack {
			all = append(all, item)
		}
	}
	mem.mu.Unlock()
	mem.handBack(all, moveLeft)
	mem.owning.Wait()
}
