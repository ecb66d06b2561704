package redis

import (
	"context"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
)

// scriptCall is one run of a script for one name (renew_many's, for
// several): what to send and, once run, what came back. The single calls and
// the batches build and read it the same way, so a request means the same
// thing, and its reply is parsed by the same code, whichever way it travels.
type scriptCall struct {
	script *goredis.Script
	// name is the lease name: calls on one name keep their order. A call on
	// several names (renew_many) has them in names instead, in the order of
	// its keys.
	name  string
	names []string
	keys  []string
	args  []any
	// confirm marks a write that replica confirmation (WAIT) must confirm:
	// an acquire or a renewal, not a release.
	confirm bool

	// cmd is the outcome: a reply, a Redis error reply or a fault.
	cmd *goredis.Cmd
	// acked is what the WAIT after the call reported, and waitErr its fault,
	// when one ran.
	acked   int64
	waitErr error
}

// result is the call's reply, or its error: the script's own, else the
// fault of the WAIT that was to confirm it.
func (c *scriptCall) result() (any, error) {
	if err := c.cmd.Err(); err != nil {
		return nil, err
	}
	if c.confirm && c.waitErr != nil {
		return nil, fmt.Errorf("WAIT: %w", c.waitErr)
	}
	return c.cmd.Val(), nil
}

// fail records err as the call's outcome without sending it.
func (c *scriptCall) fail(ctx context.Context, err error) {
	c.cmd = goredis.NewCmd(ctx)
	c.cmd.SetErr(err)
}

// The acquire script's wait flag, boxed once: a string put in an interface
// at each call would be one more allocation per call.
var (
	argWait   any = "1"
	argNoWait any = "0"
)

// acquireCall is the acquire script for r (scripts/CONTRACT.md). The queue's
// arguments go only with a request that asks to be queued, which the script
// tells by their presence.
func (b *Backend) acquireCall(r backend.AcquireRequest) scriptCall {
	wait := argNoWait
	if r.Wait && b.cfg.notify {
		wait = argWait
	}
	script := acquireScript
	args := []any{r.Owner, r.Attempt, ttlMillis(r.TTL), r.Metadata, b.graceArg, wait}
	if r.Limit > 1 {
		// One of n slots: the shared script, the limit and what a hand-off
		// of a free slot is published with before the queue's arguments.
		script = acquireSharedScript
		args = append(args, strconv.Itoa(r.Limit), b.handOffArg, r.Key)
	}
	if q := r.Queue; b.cfg.queue && r.Wait && q.EntryTTL > 0 {
		notify := q.Notify
		if !b.cfg.notify {
			notify = "" // nobody here could receive it
		}
		args = append(args, ttlMillis(q.EntryTTL), ttlMillis(q.Pickup), notify, strconv.FormatUint(q.Poll, 10))
	}
	return scriptCall{
		script: script, name: r.Key, confirm: true,
		keys: b.keysOf(r.Key),
		args: args,
	}
}

// renewCall is the renew script for r.
func (b *Backend) renewCall(r backend.RenewRequest) scriptCall {
	return scriptCall{
		script: renewScript, name: r.Key, confirm: true,
		keys: []string{b.LeaseKey(r.Key)},
		args: appendRenewArgs(make([]any, 0, 4), r),
	}
}

// renewManyCall is the renew_many script for the requests of rs at idx,
// whose lease keys are at the same places in keys: renewCall's keys and
// arguments for each, one after the other.
func renewManyCall(rs []backend.RenewRequest, keys []string, idx []int) scriptCall {
	c := scriptCall{
		script: renewManyScript, confirm: true,
		names: make([]string, len(idx)),
		keys:  make([]string, len(idx)),
		args:  make([]any, 0, 4*len(idx)),
	}
	for j, i := range idx {
		c.names[j], c.keys[j] = rs[i].Key, keys[i]
		c.args = appendRenewArgs(c.args, rs[i])
	}
	return c
}

// appendRenewArgs appends the renew script's arguments for r to args
// (renew_many takes the same four per renewal).
func appendRenewArgs(args []any, r backend.RenewRequest) []any {
	return append(args, r.Owner, r.Attempt, strconv.FormatUint(r.Token, 10), ttlMillis(r.TTL))
}

// releaseCall is the release script for r.
func (b *Backend) releaseCall(r backend.ReleaseRequest) scriptCall {
	token := "0"
	if r.Token != 0 {
		token = strconv.FormatUint(r.Token, 10)
	}
	return scriptCall{
		script: releaseScript, name: r.Key,
		keys: b.keysOf(r.Key),
		args: []any{r.Owner, r.Attempt, token, b.channelArg, r.Key, b.handOffArg, b.forgetArg},
	}
}

// acquireAnswer reads the outcome of an acquire call as Acquire answers it,
// before any replica confirmation is checked.
func (b *Backend) acquireAnswer(ctx context.Context, r backend.AcquireRequest, c *scriptCall) (backend.Grant, error) {
	reply, err := c.result()
	if err != nil {
		b.reloadAfter(ctx, err)
		return backend.Grant{}, fmt.Errorf("redis: acquire %q: %w", r.Key, err)
	}
	g, err := parseAcquire(reply)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("redis: acquire %q: %w", r.Key, err)
	}
	return g, nil
}

// unconfirmedGrant reports whether g is a grant that too few replicas
// acknowledged: it must be given back before anyone counts on it.
func (b *Backend) unconfirmedGrant(g backend.Grant, c *scriptCall) bool {
	return g.Acquired && b.cfg.replicas > 0 && c.acked < int64(b.cfg.replicas)
}

// unconfirmedAnswer is Acquire's answer for a grant too few replicas
// acknowledged, once releasing it returned releaseErr: after a failover to one
// of the others the name would be free again while this owner works, so it
// does not count as acquired. It is a fault, not a refusal: nobody holds the
// name, and "not acquired" would tell the caller that someone does. If the
// release failed the grant may still stand; the engine cleans up after a
// fault as after any ambiguous acquire.
func (b *Backend) unconfirmedAnswer(r backend.AcquireRequest, acked int64, releaseErr error) (backend.Grant, error) {
	if releaseErr != nil {
		return backend.Grant{}, fmt.Errorf("redis: acquire %q: %w (%d of %d replicas) and releasing it failed: %w",
			r.Key, ErrNotConfirmed, acked, b.cfg.replicas, releaseErr)
	}
	return backend.Grant{}, fmt.Errorf("redis: acquire %q: %w (%d of %d replicas); the grant was given back",
		r.Key, ErrNotConfirmed, acked, b.cfg.replicas)
}

// renewAnswer reads the outcome of a renew call as Renew answers it.
func (b *Backend) renewAnswer(ctx context.Context, r backend.RenewRequest, c *scriptCall) (backend.Grant, error) {
	reply, err := c.result()
	return b.renewResult(ctx, r, reply, err, c.acked)
}

// renewResult is the answer to r given the script's reply for it (renew's
// whole reply, or its element of renew_many's) or the error in its place,
// and the replicas that acknowledged it.
func (b *Backend) renewResult(ctx context.Context, r backend.RenewRequest, reply any, err error, acked int64) (backend.Grant, error) {
	if err != nil {
		b.reloadAfter(ctx, err)
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w", r.Key, err)
	}
	g, holder, err := parseRenew(reply)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w", r.Key, err)
	}
	if !g.Acquired {
		if holder == "" {
			return backend.Grant{}, fmt.Errorf("redis: renew %q: %w (the name is free)", r.Key, backend.ErrNotHeld)
		}
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w (held by %q)", r.Key, backend.ErrNotHeld, holder)
	}
	if b.cfg.replicas > 0 && acked < int64(b.cfg.replicas) {
		return backend.Grant{}, fmt.Errorf("redis: renew %q: %w (%d of %d replicas)", r.Key, ErrNotConfirmed, acked, b.cfg.replicas)
	}
	g.Token = r.Token
	return g, nil
}

// releaseAnswer reads the outcome of a release call as Release answers it:
// releasing nothing is no error.
func (b *Backend) releaseAnswer(ctx context.Context, r backend.ReleaseRequest, c *scriptCall) error {
	if _, err := c.result(); err != nil {
		b.reloadAfter(ctx, err)
		return fmt.Errorf("redis: release %q: %w", r.Key, err)
	}
	return nil
}
