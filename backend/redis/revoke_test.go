package redis

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/redis/internal/redistest"
)

// A revoke whose answer is lost after the script ran (the connection closes
// on the first bytes of the reply) is sent again by go-redis's own retry,
// which finds the holding gone: the receipt says this revoke removed it (it
// said "not there"). A later revoke of the same holding is a new call, with
// a receipt of its own: not there.
func TestRevokeWhoseAnswerWasLost(t *testing.T) {
	p := redistest.NewProxy(t, redistest.Addr())
	var armed atomic.Bool
	c := goredis.NewClient(&goredis.Options{
		Addr:                  p.Addr(),
		ContextTimeoutEnabled: true,
		MaxRetries:            3, // go-redis's default, the CLI's
		PoolSize:              1,
		// The connection made in place of the one the fault closed turns
		// the fault off: the resend gets through.
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if armed.CompareAndSwap(true, false) {
				p.DropReplies(false)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { _ = c.Close() })
	direct := newTestBackend(t, redistest.Client(t))
	b, err := New(c, WithKeyPrefix(direct.cfg.prefix))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b)
	ctx := ctxT(t)
	// The pool's connection, made before the fault, and the script loaded:
	// the answer lost is the revoke's own.
	if _, removed, err := b.Revoke(ctx, "job", 0); err != nil || removed {
		t.Fatalf("Revoke of a free name: removed %v, %v", removed, err)
	}
	g := mustAcquire(t, direct, "job", "holder", time.Minute)
	armed.Store(true)
	p.DropReplies(true)
	h, removed, err := b.Revoke(ctx, "job", g.Token)
	if err != nil || !removed || h.Token != g.Token || h.Owner != "holder" {
		t.Fatalf("Revoke with its answer lost: %+v, removed %v, %v; want holder's holding (token %d) removed", h, removed, err, g.Token)
	}
	if p.RepliesDropped() == 0 {
		t.Fatal("no answer was lost: the test proves nothing")
	}
	if _, held, err := direct.Inspect(ctx, "job"); err != nil || held {
		t.Errorf("after the revoke: held %v, %v; want free", held, err)
	}
	if _, err := direct.Renew(ctx, g.renew(time.Minute)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("the holder's renewal after the revoke: %v, want ErrNotHeld", err)
	}
	if _, removed, err := b.Revoke(ctx, "job", g.Token); err != nil || removed {
		t.Errorf("a second Revoke of the revoked holding: removed %v, %v; want not there", removed, err)
	}
}
