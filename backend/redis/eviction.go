package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// policyCheckTimeout bounds New's maxmemory-policy check; NewContext uses
// its caller's context instead.
const policyCheckTimeout = 5 * time.Second

// checkEviction makes sure no server behind the client may evict a lease: each
// one's maxmemory-policy must be noeviction. The allkeys-* policies evict
// records, and an evicted record frees a name while its holder works. Held
// records have no TTL, so the volatile-* policies leave them, but they evict
// what has one: a holding written by an earlier version (during an upgrade),
// the waiter queue, and free records waiting to be forgotten.
//
// A server that answers CONFIG GET with an error (CONFIG renamed or disabled,
// an ACL without +config) gives ErrEvictionPolicy, naming WithEvictionAllowed;
// a fault on the way (no connection, ctx ending) is returned as such.
func (b *Backend) checkEviction(ctx context.Context) error {
	var err error
	if terr := b.roundTrip(ctx, nil, func(ctx context.Context) {
		switch c := b.client.(type) {
		case *goredis.ClusterClient:
			if err = c.ForEachMaster(ctx, checkPolicy); err == nil {
				b.slotMap.Store(true)
			}
		case *goredis.Client:
			err = checkPolicy(ctx, c)
		default:
			err = policyOf(ctx, b.client, "the server")
		}
	}); terr != nil {
		return fmt.Errorf("redis: checking maxmemory-policy: %w", terr)
	}
	return err
}

func checkPolicy(ctx context.Context, c *goredis.Client) error {
	return policyOf(ctx, c, c.Options().Addr)
}

// policyOf checks the policy of the server c talks to; where names it in
// errors (an address, never credentials).
func policyOf(ctx context.Context, c goredis.Cmdable, where string) error {
	vals, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		var reply goredis.Error
		if errors.As(err, &reply) {
			return fmt.Errorf("%w: cannot read maxmemory-policy on %s (%v); if CONFIG is disabled there, make sure the policy is noeviction and pass WithEvictionAllowed",
				ErrEvictionPolicy, where, err)
		}
		return fmt.Errorf("redis: checking maxmemory-policy on %s: %w", where, err)
	}
	policy, ok := vals["maxmemory-policy"]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s did not report its maxmemory-policy; make sure it is noeviction and pass WithEvictionAllowed",
			ErrEvictionPolicy, where)
	case policy != "noeviction":
		return fmt.Errorf("%w: maxmemory-policy is %q on %s: under memory pressure Redis may delete a live lease and grant its name to a second holder; set it to noeviction, or accept the risk with WithEvictionAllowed",
			ErrEvictionPolicy, policy, where)
	}
	return nil
}
