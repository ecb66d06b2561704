package backend

import (
	"context"
	"testing"
)

// fullFake has every optional capability; its methods are never called here.
type fullFake struct{}

func (fullFake) Info() Info                                             { return Info{Name: "fake"} }
func (fullFake) Close() error                                           { return nil }
func (fullFake) Acquire(context.Context, AcquireRequest) (Grant, error) { return Grant{}, nil }
func (fullFake) Renew(context.Context, RenewRequest) (Grant, error)     { return Grant{}, nil }
func (fullFake) Release(context.Context, ReleaseRequest) error          { return nil }
func (fullFake) WatchReleases(context.Context, func(string)) error      { return nil }
func (fullFake) RenewBatch(context.Context, []RenewRequest) ([]RenewResult, error) {
	return nil, nil
}
func (fullFake) Batch(context.Context, []Call)                          {}
func (fullFake) Inspect(context.Context, string) (Holding, bool, error) { return Holding{}, false, nil }
func (fullFake) List(context.Context, string, func(Holding) bool) error { return nil }
func (fullFake) Revoke(context.Context, string, uint64) (Holding, bool, error) {
	return Holding{}, false, nil
}
func (fullFake) Immediate() {}
func (fullFake) WatchHandOffs(context.Context, string, func(HandOff), func()) error {
	return nil
}

// Every combination type has exactly its capabilities, and Wrap of a backend
// with any set of capabilities has the same set (Immediate only when the
// middleware is declared non-blocking).
func TestWrapKeepsExactlyTheCapabilities(t *testing.T) {
	all := 1<<capCount - 1
	if got := capabilitiesOf(fullFake{}, true); got != all {
		t.Fatalf("the full fake has capabilities %b, want %b", got, all)
	}
	for c := range 1 << capCount {
		inner := wrapCombos[c](&wrapped{inner: fullFake{}})
		if got := capabilitiesOf(inner, true); got != c {
			t.Errorf("wrap%d has capabilities %08b, want %08b", c, got, c)
			continue
		}
		if got := capabilitiesOf(Wrap(inner, Middleware{}), true); got != c&^capImmediate {
			t.Errorf("Wrap of %08b has %08b, want %08b (no Immediate by default)", c, got, c&^capImmediate)
		}
		if got := capabilitiesOf(Wrap(inner, Middleware{NonBlocking: true}), true); got != c {
			t.Errorf("Wrap of %08b with a non-blocking middleware has %08b", c, got)
		}
	}
}

// shardedFake is a Sharder whose shard is the key's first byte.
type shardedFake struct{ fullFake }

func (shardedFake) Shard(key string) string { return key[:1] }

// Every wrapper answers Shard as its inner backend does, and "" (one shard)
// when that one is not a Sharder; wrapping twice changes nothing.
func TestWrapForwardsShard(t *testing.T) {
	s, ok := Wrap(Wrap(shardedFake{}, Middleware{}), Middleware{NonBlocking: true}).(Sharder)
	if !ok || s.Shard("abc") != "a" || s.Shard("xyz") != "x" {
		t.Fatalf("Shard through two wrappers: %v", ok)
	}
	if s, ok := Wrap(fullFake{}, Middleware{}).(Sharder); !ok || s.Shard("abc") != "" {
		t.Fatalf("Shard of a wrapped backend without shards: %v", ok)
	}
}
