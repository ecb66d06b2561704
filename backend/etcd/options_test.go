package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/etcd"
)

// unreachableClient is a client of an address nothing listens on: a test
// that uses it proves that no call reached etcd (it would hang, then fail).
func unreachableClient(t *testing.T) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestNewRejectsBadOptions(t *testing.T) {
	cli := unreachableClient(t)
	for name, opts := range map[string][]etcd.Option{
		"min TTL below 1s":          {etcd.WithMinTTL(500 * time.Millisecond)},
		"min TTL not whole seconds": {etcd.WithMinTTL(1500 * time.Millisecond)},
		"empty prefix":              {etcd.WithKeyPrefix("")},
		"nil logger":                {etcd.WithLogger(nil)},
	} {
		if _, err := etcd.New(cli, opts...); !errors.Is(err, etcd.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := etcd.New(nil); !errors.Is(err, etcd.ErrInvalidOption) {
		t.Errorf("nil client: %v, want ErrInvalidOption", err)
	}
}

// TestTTLLimitsRejectedBeforeAnyCall: TTLs etcd cannot keep (fractions of a
// second, below the minimum) are refused with a message that says why,
// without a call (the client reaches nothing), directly and through a
// Manager (ErrInvalidOption).
func TestTTLLimitsRejectedBeforeAnyCall(t *testing.T) {
	b, err := etcd.New(unreachableClient(t), etcd.WithMinTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ttl, why := range map[time.Duration]string{
		1500 * time.Millisecond: "not a whole number of seconds",
		500 * time.Millisecond:  "not a whole number of seconds",
		time.Second:             "below this etcd backend's minimum 2s",
	} {
		start := time.Now()
		_, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a1", TTL: ttl})
		if !errors.Is(err, backend.ErrInvalidRequest) || !strings.Contains(err.Error(), why) {
			t.Errorf("Acquire with TTL %v: %v, want ErrInvalidRequest saying %q", ttl, err, why)
		}
		_, err = b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "o", Attempt: "a1", Token: 1, TTL: ttl})
		if !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Renew with TTL %v: %v, want ErrInvalidRequest", ttl, err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("TTL %v: refused after %v: a call was made", ttl, d)
		}
	}
	m, err := leasehold.New(b, leasehold.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	_, err = m.Acquire(ctx, "job", leasehold.WithTTL(1500*time.Millisecond))
	if !errors.Is(err, leasehold.ErrInvalidOption) || !strings.Contains(err.Error(), "whole number of seconds") {
		t.Errorf("Manager.Acquire with TTL 1.5s: %v, want ErrInvalidOption saying why", err)
	}
}
