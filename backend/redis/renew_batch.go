package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/roundtrip"
)

// maxRenewChunk bounds the renewals of one renew_many call. A script blocks
// the server while it runs, and each renewal costs it an HMGET and an HSET
// (about 0.5 µs each, scripts/CONTRACT.md) and a little Lua: 500
// keep one call near half a millisecond, the order of one slow command,
// while the costs of a call (the server's dispatch of it; the client's
// building, writing and parsing of one command) are shared by hundreds of
// renewals, which is where the saving is. (An estimate from those figures,
// not a measurement.) A larger batch goes in several calls, in one pipeline.
const maxRenewChunk = 500

// RenewBatch renews every request in one pipelined round trip (one per
// Cluster master) and returns one result per request, in order: a Grant, or
// an error wrapping backend.ErrNotHeld (the holding no longer exists),
// backend.ErrInvalidRequest (that request breaks the limits; it is not sent),
// ErrNotConfirmed (too few replicas acknowledged), a Redis error reply for
// that lease alone, or, on Cluster, the fault of the one node that could not
// answer (its renewals are unconfirmed; the other nodes' stand). A non-nil
// error means the batch as a whole could not be confirmed (a network fault on
// every node, the context ending); then no result is returned and the caller
// must treat every renewal as unconfirmed.
//
// The renewals travel in renew_many calls (scripts/CONTRACT.md) of up to 500
// each, not one call each: each renewal is answered as the renew script
// answers it, but the client builds and parses one command per call. On
// Cluster, where the keys of one call must share a slot, a call carries the
// renewals of one slot.
//
// With replica confirmation on a single node or Sentinel client, one WAIT at
// the end of the pipeline confirms the whole batch. On Cluster the requests
// are grouped by the master of their slot, and each group is pipelined to its
// master (with a WAIT of its own when confirmation is on), the groups in
// parallel: a dead master costs only its own renewals, and only the time its
// client takes to give up on it; when ctx ends first, the masters that have
// answered keep their results. The engine sends each master's renewals in
// batches of their own (Shard), answered as each comes.
func (b *Backend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	if err := b.closed(); err != nil {
		return nil, err
	}
	results := make([]backend.RenewResult, len(rs))
	keys := make([]string, len(rs)) // the lease keys of the requests sent
	var (
		sent  []int    // indexes in rs of the requests sent
		names []string // their names
	)
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			results[i].Err = err
			continue
		}
		keys[i] = b.LeaseKey(r.Key)
		sent = append(sent, i)
		names = append(names, r.Key)
	}
	if len(sent) == 0 {
		return results, nil
	}
	rs = slices.Clone(rs) // read by the round trips, which may outlive the call
	if cc, ok := b.client.(*goredis.ClusterClient); ok {
		return b.renewPerMaster(ctx, cc, rs, keys, sent, names, results)
	}
	var (
		out []backend.RenewResult
		err error
	)
	if terr := b.roundTrip(ctx, names, func(ctx context.Context) { out, err = b.renewOne(ctx, rs, keys, sent, results) }); terr != nil {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), terr)
	}
	return out, err
}

// renewOne is RenewBatch's round trip on one server (or Sentinel's primary)
// for the requests of rs at sent, whose lease keys are in keys; it fills in
// their results.
func (b *Backend) renewOne(ctx context.Context, rs []backend.RenewRequest, keys []string, sent []int,
	results []backend.RenewResult) ([]backend.RenewResult, error) {
	var via pipeClient = b.client
	if b.cfg.replicas > 0 {
		node, err := b.primary(ctx, keys[sent[0]])
		if err != nil {
			return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
		}
		via = node
	}
	chunks := renewChunks(rs, keys, sent, false)
	if err := b.renewRound(ctx, via, chunks); err != nil {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
	}
	b.fillRenewals(ctx, results, rs, chunks)
	return results, nil
}

// renewChunk is one renew_many call and the renewals it carries.
type renewChunk struct {
	call scriptCall
	// idx are the indexes in the batch's requests of its renewals, in the
	// order of the call's keys and of its reply.
	idx []int
}

// renewChunks puts the renewals of rs at idx (keys holds their lease keys at
// the same indexes) in renew_many calls of at most maxRenewChunk each, in
// order. With bySlot (Cluster: the keys of one call must share a slot) each
// call carries the renewals of one slot, the slots in order of their number:
// the renewals of one slot, and so of one name, keep their order.
func renewChunks(rs []backend.RenewRequest, keys []string, idx []int, bySlot bool) []renewChunk {
	if !bySlot {
		return appendChunks(nil, rs, keys, idx)
	}
	type slotted struct{ slot, i int }
	bySlots := make([]slotted, len(idx))
	for j, i := range idx {
		bySlots[j] = slotted{keySlot(keys[i]), i}
	}
	slices.SortStableFunc(bySlots, func(a, b slotted) int { return cmp.Compare(a.slot, b.slot) })
	sorted := make([]int, len(idx))
	for j, s := range bySlots {
		sorted[j] = s.i
	}
	var chunks []renewChunk
	for start := 0; start < len(sorted); {
		end := start + 1
		for end < len(sorted) && bySlots[end].slot == bySlots[start].slot {
			end++
		}
		chunks = appendChunks(chunks, rs, keys, sorted[start:end])
		start = end
	}
	return chunks
}

// appendChunks appends to chunks the renewals at idx, cut in calls of at
// most maxRenewChunk.
func appendChunks(chunks []renewChunk, rs []backend.RenewRequest, keys []string, idx []int) []renewChunk {
	for len(idx) > 0 {
		n := min(len(idx), maxRenewChunk)
		chunks = append(chunks, renewChunk{call: renewManyCall(rs, keys, idx[:n]), idx: idx[:n]})
		idx = idx[n:]
	}
	return chunks
}

// fillRenewals turns the outcomes of the chunks sent into results: each
// renewal is answered as renewAnswer answers a renew call, from its own
// element of its call's reply.
func (b *Backend) fillRenewals(ctx context.Context, results []backend.RenewResult, rs []backend.RenewRequest, chunks []renewChunk) {
	for k := range chunks {
		c, idx := &chunks[k].call, chunks[k].idx
		// The call's own error (a fault, NOSCRIPT that could not be mended,
		// a reply of the wrong shape) is every renewal's in it.
		err := c.cmd.Err()
		replies, ok := c.cmd.Val().([]any)
		switch {
		case err != nil:
		case !ok:
			err = fmt.Errorf("%w: %v", errReply, c.cmd.Val())
		case len(replies) != len(idx):
			err = fmt.Errorf("%w: %d answers to %d renewals", errReply, len(replies), len(idx))
		}
		for j, i := range idx {
			var reply any
			rerr := err
			if rerr == nil {
				reply = replies[j]
				// A Redis error reply answers this renewal alone; only
				// then does the WAIT's fault count, as in c.result.
				if e, isErr := reply.(error); isErr {
					rerr = e
				} else if c.waitErr != nil {
					rerr = fmt.Errorf("WAIT: %w", c.waitErr)
				}
			}
			results[i].Grant, results[i].Err = b.renewResult(ctx, rs[i], reply, rerr, c.acked)
		}
	}
}

// renewRound sends the chunks' calls, and WAIT when confirmation is on, in
// one pipeline on via (a second one when the server had to be given the
// script). It returns an error when no call got an answer from Redis (a fault
// of the whole link) or when WAIT failed; a fault met by only some calls (one
// Cluster node down) stays in their calls.
func (b *Backend) renewRound(ctx context.Context, via pipeClient, chunks []renewChunk) error {
	calls := make([]*scriptCall, len(chunks))
	for k := range chunks {
		calls[k] = &chunks[k].call
	}
	b.runPipeline(ctx, via, calls, b.cfg.replicas > 0)
	answered := false
	var fault, waitFault error
	for _, c := range calls {
		err := c.cmd.Err()
		var reply goredis.Error
		switch {
		case err == nil || errors.As(err, &reply):
			answered = true
			if c.waitErr != nil && waitFault == nil {
				waitFault = fmt.Errorf("WAIT: %w", c.waitErr)
			}
		case fault == nil:
			fault = err
		}
	}
	if !answered {
		return fault // not an answer from Redis: nothing is confirmed
	}
	return waitFault
}

// renewPerMaster is RenewBatch on Cluster. The renewals are grouped by the
// master of their slot and each group is pipelined to that master, one
// renew_many call per slot (several for a slot of more than maxRenewChunk),
// with its own WAIT when confirmation is on (one WAIT speaks only for the
// node and connection it runs on), the groups in parallel, each a round trip
// of its own: when ctx ends, the groups answered by then keep their results.
// A group whose master cannot be reached leaves its renewals unconfirmed and
// the others alone, and makes the client reload the slot map, so that the
// next batch finds the replica that took over. (A ClusterClient's own
// pipeline waits for every node, and retries a dead one for seconds, which
// would cost the live masters' leases.)
func (b *Backend) renewPerMaster(ctx context.Context, cc *goredis.ClusterClient, rs []backend.RenewRequest,
	keys []string, sent []int, names []string, results []backend.RenewResult) ([]backend.RenewResult, error) {
	var (
		groups map[*goredis.Client][]int
		order  []*goredis.Client
		missed map[int]error // renewals whose master is unknown
	)
	// Finding the masters loads the slot map the first time.
	if err := b.roundTrip(ctx, nil, func(ctx context.Context) { groups, order, missed = b.byMaster(ctx, cc, keys, sent) }); err != nil {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
	}
	for i, err := range missed {
		results[i].Err = fmt.Errorf("redis: renew %q: %w", rs[i].Key, err)
	}
	// The outcome of each group: written by its trip, read once it is done.
	type outcome struct {
		trip    *roundtrip.Trip
		names   []string
		results []backend.RenewResult
		err     error
	}
	outs := make([]outcome, len(order))
	for g, node := range order {
		for _, i := range groups[node] {
			outs[g].names = append(outs[g].names, rs[i].Key)
		}
	}
	if err := b.trips.Wait(ctx, names); err != nil {
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
	}
	for g, node := range order {
		o, idx := &outs[g], groups[node]
		o.results = make([]backend.RenewResult, len(rs))
		o.trip = b.trips.Start(ctx, func(ctx context.Context) {
			chunks := renewChunks(rs, keys, idx, true)
			if o.err = b.renewRound(ctx, node, chunks); o.err != nil {
				b.reloadAfter(ctx, o.err)
				return
			}
			b.fillRenewals(ctx, o.results, rs, chunks)
		})
	}
	faults := make([]error, len(order))
	for g, node := range order {
		o := &outs[g]
		if err := b.trips.Await(ctx, o.trip, o.names); err != nil {
			faults[g] = err
		} else {
			faults[g] = o.err
		}
		for _, i := range groups[node] {
			if faults[g] != nil {
				results[i].Err = fmt.Errorf("redis: renew %q: %w", rs[i].Key, faults[g])
			} else {
				results[i] = o.results[i]
			}
		}
	}
	if len(order) > 0 && len(order) == countErrs(faults) {
		if err := roundtrip.Ended(ctx); err != nil {
			return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), err)
		}
		return nil, fmt.Errorf("redis: renew batch of %d: %w", len(sent), errors.Join(faults...))
	}
	return results, nil
}

// byMaster groups the renewals at sent by the master of their lease key, in
// keys, in the client's slot map: the groups, their masters in order, and
// the renewals whose master it could not tell.
func (b *Backend) byMaster(ctx context.Context, cc *goredis.ClusterClient, keys []string, sent []int) (
	groups map[*goredis.Client][]int, order []*goredis.Client, missed map[int]error) {
	groups = map[*goredis.Client][]int{}
	for _, i := range sent {
		node, err := cc.MasterForKey(ctx, keys[i])
		if err != nil {
			if missed == nil {
				missed = map[int]error{}
			}
			missed[i] = err
			continue
		}
		b.slotMap.Store(true)
		if _, ok := groups[node]; !ok {
			order = append(order, node)
		}
		groups[node] = append(groups[node], i)
	}
	return groups, order, missed
}

func countErrs(errs []error) int {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	return n
}
