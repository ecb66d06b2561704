package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/internal/faultproxy"
)

// lostAnswers is a backend on an env's table whose one connection goes
// through a fault proxy. lose makes the proxy drop the answer to the next
// request (and close that connection); the connection the pool makes in its
// place turns the fault off, so a resend gets through.
type lostAnswers struct {
	b     *Backend
	proxy *faultproxy.Proxy
	armed atomic.Bool
}

func newLostAnswers(t *testing.T, e *testEnv) *lostAnswers {
	t.Helper()
	l := &lostAnswers{}
	pool, proxy := proxiedPool(t, e, func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
			if l.armed.CompareAndSwap(true, false) {
				l.proxy.DropReplies(false)
			}
			return nil
		}
	})
	l.proxy = proxy
	b, err := New(pool, WithTable(e.schema, e.table))
	if err != nil {
		t.Fatal(err)
	}
	l.b = b
	return l
}

func (l *lostAnswers) lose() {
	l.armed.Store(true)
	l.proxy.DropReplies(true)
}

// A revoke whose answer is lost after the store acted, and that the backend
// sends again, says it removed the holding (it said "not there": the resend
// found the holding gone), whether the lost answer was the first one or
// COMMIT's. A later revoke of the same holding is a new call: not there.
func TestRevokeWhoseAnswerWasLost(t *testing.T) {
	for _, c := range []struct {
		name string
		lose func(l *lostAnswers, stages *[]string)
	}{
		{"first answer", func(l *lostAnswers, stages *[]string) { l.lose() }},
		{"COMMIT's answer", func(l *lostAnswers, stages *[]string) {
			l.b.revokeHook = func(stage string) {
				*stages = append(*stages, stage)
				if stage == "commit" {
					l.lose()
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			direct := e.backend(t)
			l := newLostAnswers(t, e)
			// The pool's connection, made before the fault, with the revoke's
			// statements prepared on it: the answer lost is the revoke's.
			if _, removed, err := l.b.Revoke(ctxT(t), "job", 0); err != nil || removed {
				t.Fatalf("Revoke of a free name: removed %v, %v", removed, err)
			}
			g := mustAcquire(t, direct, "job", "holder", live)
			var stages []string
			c.lose(l, &stages)
			h, removed, err := l.b.Revoke(ctxT(t), "job", g.Token)
			if err != nil || !removed || h.Token != g.Token || h.Owner != "holder" {
				t.Fatalf("Revoke with its answer lost: %+v, removed %v, %v; want holder's holding (token %d) removed", h, removed, err, g.Token)
			}
			if l.proxy.RepliesDropped() == 0 {
				t.Fatal("no answer was lost: the test proves nothing")
			}
			if c.name == "COMMIT's answer" && (len(stages) != 2 || stages[1] != "settle") {
				t.Errorf("revoke stages %q, want commit then settle", stages)
			}
			if _, held, err := direct.Inspect(ctxT(t), "job"); err != nil || held {
				t.Errorf("after the revoke: held %v, %v; want free", held, err)
			}
			if _, err := direct.Renew(ctxT(t), g.renewReq(live)); !errors.Is(err, backend.ErrNotHeld) {
				t.Errorf("the holder's renewal after the revoke: %v, want ErrNotHeld", err)
			}
			if _, removed, err := l.b.Revoke(ctxT(t), "job", g.Token); err != nil || removed {
				t.Errorf("a second Revoke of the revoked holding: removed %v, %v; want not there", removed, err)
			}
		})
	}
}
