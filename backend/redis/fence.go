package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
)

//go:embed scripts/fence.lua
var fenceSrc string

var fenceScript = goredis.NewScript(fenceSrc)

// ErrCrossSlot is returned (wrapped) by a Fence write on Redis Cluster when
// a written key is not on the fence key's hash slot: one script cannot
// touch both. Put the resource's hash tag, {resource}, in the key's name.
var ErrCrossSlot = errors.New("redis: fenced key not on the fence key's hash slot")

// FenceKey is the key where a Fence records the highest token of resource:
// "leasehold:fence:{resource}". It never expires: a fence that is evicted
// or expires lets a stale holder through, so keep the server on
// maxmemory-policy noeviction, as the lease keys need anyway.
func FenceKey(resource string) string { return "leasehold:fence:{" + resource + "}" }

// Fence guards writes of Redis keys with a fencing token: each write runs in
// one script that compares the token with the highest recorded for the
// resource, refuses a lower one with a *leasehold.StaleTokenError (errors.Is
// leasehold.ErrStaleToken) and writes nothing, or writes and records the
// token. An equal token passes (the same holder writing again). So the last
// write of a key guarded this way is always the newest holder's.
//
// On Redis Cluster the fence key and the written keys must be on one hash
// slot: name them with the resource's hash tag, e.g. "{invoices}:total" for
// the resource "invoices". A write that breaks the rule is refused with
// ErrCrossSlot before anything is sent. Keys written by other means are not
// guarded.
type Fence struct {
	client   goredis.UniversalClient
	resource string
}

// Fenced returns the Fence of resource on client.
func Fenced(client goredis.UniversalClient, resource string) *Fence {
	return &Fence{client: client, resource: resource}
}

// Set sets key to value (with ttl, 0 for none) under token.
func (f *Fence) Set(ctx context.Context, token uint64, key, value string, ttl time.Duration) error {
	if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) {
		return fmt.Errorf("%w: ttl %v is neither 0 nor at least 1ms", fence.ErrInvalidFence, ttl)
	}
	return f.run(ctx, token, "set", []string{key}, value, strconv.FormatInt(ttl.Milliseconds(), 10))
}

// HSet sets the fields of the hash key under token: field, value, field,
// value, ...
func (f *Fence) HSet(ctx context.Context, token uint64, key string, fieldValues ...string) error {
	if len(fieldValues) == 0 || len(fieldValues)%2 != 0 {
		return fmt.Errorf("%w: HSet needs field, value pairs, got %d strings", fence.ErrInvalidFence, len(fieldValues))
	}
	args := make([]any, len(fieldValues))
	for i, s := range fieldValues {
		args[i] = s
	}
	return f.run(ctx, token, "hset", []string{key}, args...)
}

// Del deletes keys under token.
func (f *Fence) Del(ctx context.Context, token uint64, keys ...string) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: Del needs at least one key", fence.ErrInvalidFence)
	}
	return f.run(ctx, token, "del", keys)
}

// Check records token for the resource, writing nothing else: the
// fence.Store of FenceStore.
func (f *Fence) Check(ctx context.Context, token uint64) error {
	return f.run(ctx, token, "check", nil)
}

func (f *Fence) run(ctx context.Context, token uint64, op string, keys []string, args ...any) error {
	if err := fence.Validate(f.resource, token); err != nil {
		return err
	}
	fk := FenceKey(f.resource)
	for _, k := range keys {
		if k == "" || k == fk {
			return fmt.Errorf("%w: key %q cannot be written under a fence", fence.ErrInvalidFence, k)
		}
	}
	if _, cluster := f.client.(*goredis.ClusterClient); cluster {
		for _, k := range keys {
			if hashSlot(k) != hashSlot(fk) {
				return fmt.Errorf("%w: %q is on slot %d, the fence of %q on slot %d; name the key with the hash tag {%s}",
					ErrCrossSlot, k, hashSlot(k), f.resource, hashSlot(fk), f.resource)
			}
		}
	}
	reply, err := fenceScript.Run(ctx, f.client, append([]string{fk}, keys...),
		append([]any{strconv.FormatUint(token, 10), op}, args...)...).Slice()
	if err != nil {
		return fmt.Errorf("redis: fence %q: %w", f.resource, err)
	}
	if len(reply) == 2 {
		s, _ := reply[1].(string)
		highest, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("redis: fence %q: recorded token %q is not a number", f.resource, s)
		}
		return &leasehold.StaleTokenError{Resource: f.resource, Token: token, Highest: highest}
	}
	return nil
}

// FenceStore is a fence.Store on client's fence keys, for fence/httpfence
// and fence/grpcfence when several server processes share a resource: it
// records tokens but guards no write. Writes to this Redis are better
// guarded by a Fence.
func FenceStore(client goredis.UniversalClient) fence.Store { return fenceStore{client} }

type fenceStore struct{ client goredis.UniversalClient }

func (s fenceStore) Check(ctx context.Context, resource string, token uint64) error {
	return Fenced(s.client, resource).Check(ctx, token)
}

// hashSlot is Redis Cluster's slot of key: CRC16 (XMODEM) of its hash tag
// (what is between the first "{" and the next "}", when not empty) or of
// the whole key, modulo 16384.
func hashSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
