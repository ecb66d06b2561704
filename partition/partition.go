package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
)

// Callbacks are what a member calls as it comes to own items and stops
// owning them. Either may be nil. For one item they are never called
// concurrently, and never while another member of the group runs that
// item's OnAssigned (unless a callback outlives its grace, or ignores the
// end of its ctx after the lease was lost).
type Callbacks struct {
	// OnAssigned runs on a goroutine of its own when the member starts
	// owning item. The member owns item until ctx ends: the item is handed
	// back, lost, or the member leaves. It must return soon after ctx ends;
	// handing the item back waits for it. leasehold.LeaseFrom(ctx) is the
	// item's lease, with its fencing token. Returning earlier gives nothing
	// up: the member owns the item until ctx ends all the same.
	OnAssigned func(ctx context.Context, item string)
	// OnRevoked is called when the member has stopped owning item, after
	// OnAssigned(ctx, item) has returned and the lease has been released (or
	// has ended).
	OnRevoked func(item string)
}

// Member is this process's membership of a group, from Join until Leave or
// the end of Join's ctx. Its methods are safe for concurrent use.
type Member struct {
	m       *leasehold.Manager
	group   string
	items   []string // sorted
	cb      Callbacks
	cfg     config
	meta    string // the membership lease's metadata
	digest  string
	metrics *metrics
	log     *slog.Logger

	ctx    context.Context // ends when the member leaves
	cancel context.CancelFunc
	joined chan struct{} // closed after the first round
	done   chan struct{} // closed when the member has stopped
	err    error         // why it stopped, set before done is closed

	// Only the member's own goroutine (run) touches these after Join.
	membership *leasehold.Lease
	rejoining  bool            // the membership was lost and not taken again yet
	settling   int             // rounds left at the settling pace (settleRounds)
	warned     map[string]bool // mismatched members already logged

	mu      sync.Mutex
	held    map[string]*holding // every item with a holding still running
	members []string            // as the last round saw them
	owning  sync.WaitGroup      // the holdings' goroutines
	rounds  atomic.Int64
}

// Join makes this process (m, as m.Owner()) a member of group, which shares
// items among its members, and returns once the member has joined and taken
// the free items its share allows at first. From then on, every
// rebalance period (WithRebalanceEvery) it looks at the live members and
// moves towards its share: it takes free items while below it and hands items
// back while above it, never taking an item that another member holds.
//
// The member stays in the group until Leave is called or ctx ends; either
// way it hands every item back gracefully. It stops by itself, with Err
// saying why, only on what trying again cannot fix: m closed (ErrClosed), or
// a lease name the Manager refuses.
//
// Join returns, before acquiring anything: an error wrapping ErrInvalidName
// for an empty or invalid group, an item that is invalid or given twice;
// ErrInvalidOption for no items or a bad option; ErrItemSetMismatch when a
// live member of the group has another set of items (also checked just after
// joining, for a member that joined meanwhile: then both may refuse). A
// Manager's key prefix or normalizer that refuses an item's key is found at
// the item's first acquire: Join then fails with ErrInvalidName after giving
// back what it took. When the membership lease is held by another Manager
// with the same owner, Join waits up to the TTL (it may be this owner's
// previous process, whose lease expires) and then returns an error matching
// ErrNotAcquired.
func Join(ctx context.Context, m *leasehold.Manager, group string, items []string, cb Callbacks, opts ...Option) (*Member, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: partition.Join: nil Manager", leasehold.ErrInvalidOption)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	sorted, err := checkInput(group, items, m.Owner())
	if err != nil {
		return nil, err
	}
	mt, err := newMetrics(cfg.meters, group)
	if err != nil {
		return nil, fmt.Errorf("partition: metrics: %w", err)
	}
	mem := &Member{
		m: m, group: group, items: sorted, cb: cb, cfg: cfg, digest: digest(sorted), metrics: mt,
		log:    cfg.logger.With("group", group, "member", m.Owner()),
		joined: make(chan struct{}), done: make(chan struct{}),
		warned: map[string]bool{}, held: map[string]*holding{}, settling: settleRounds,
	}
	mem.meta = encode(memberMeta{Partition: metaVersion, Group: group, Items: len(sorted), Digest: mem.digest})
	if _, err := mem.liveMembers(ctx, true); err != nil {
		return nil, err
	}
	lease, err := m.Acquire(ctx, memberLease(group, m.Owner()),
		leasehold.WithTTL(cfg.ttl), leasehold.WithWait(cfg.ttl), leasehold.WithMetadata(mem.meta))
	switch {
	case errors.Is(err, leasehold.ErrNotAcquired):
		return nil, fmt.Errorf("partition: join %q: another Manager with owner %q is a member: %w", group, m.Owner(), err)
	case err != nil:
		return nil, fmt.Errorf("partition: join %q: %w", group, err)
	}
	if _, err := mem.liveMembers(ctx, true); err != nil {
		release(ctx, lease)
		return nil, err
	}
	mem.membership = lease
	mem.ctx, mem.cancel = context.WithCancel(ctx)
	go mem.run()
	select {
	case <-mem.joined:
		return mem, nil
	case <-mem.done: // stopped in the first round
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, mem.err
	}
}

// Owned lists the items this member owns now, sorted: those whose lease is
// live and which are not being handed back.
func (mem *Member) Owned() []string {
	out := mem.active()
	slices.Sort(out)
	return out
}

// Members lists the group's live members (their owners) as the member last
// saw them, sorted: the order that ranks them for their shares.
func (mem *Member) Members() []string {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	return slices.Clone(mem.members)
}

// Leave hands every item back gracefully and leaves the group: it releases
// the membership (so that the others count this member out at their next
// look and take its items as they come free), ends every item's callback
// ctx, waits for each OnAssigned to return (up to the grace; see WithGrace),
// releases its lease and calls OnRevoked. It returns nil once all of that is
// done, or ctx's error if ctx ends first; the member goes on leaving then,
// and Done is closed when it has. It is idempotent.
func (mem *Member) Leave(ctx context.Context) error {
	mem.cancel()
	select {
	case <-mem.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the member has stopped: it has left (Leave, or Join's
// ctx ended), or Err says why it could not go on; every callback has
// returned by then.
func (mem *Member) Done() <-chan struct{} { return mem.done }

// Err is nil while the member runs and after it left; after it stopped by
// itself, why (ErrClosed: the Manager was closed).
func (mem *Member) Err() error {
	select {
	case <-mem.done:
		return mem.err
	default:
		return nil
	}
}

// releaseTimeout bounds how long the member waits for the engine's answer
// to a release or a StopRenewing; the engine goes on retrying a release
// after it (see Lease.Release).
const releaseTimeout = 10 * time.Second

// release gives l back, detached from ctx, which may have ended.
func release(ctx context.Context, l *leasehold.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = l.Release(rctx) // nil without a call when the lease has ended
}

// fatal reports whether err is one that trying again cannot fix.
func fatal(err error) bool {
	return errors.Is(err, leasehold.ErrClosed) || errors.Is(err, leasehold.ErrInvalidName) || errors.Is(err, leasehold.ErrInvalidOption)
}
