package election_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/election"
	"github.com/leasehold/leasehold/internal/poll"
)

const patience = 30 * time.Second

// Manager.Close on the leader's Manager ends OnStartedLeading and waits for
// it (within ResignGrace) before the lease is released: while the callback
// finishes, honouring its ctx, the store still has this process leading, so
// no other process can start leading.
func TestManagerCloseReleasesAfterTheCallback(t *testing.T) {
	store := memory.New()
	m, err := leasehold.New(store, leasehold.WithOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	started := make(chan struct{})
	held := make(chan bool, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- election.Run(context.Background(), m, "leader", election.Callbacks{
			ResignGrace: patience,
			OnStartedLeading: func(ctx context.Context) {
				l, _ := leasehold.LeaseFrom(ctx)
				close(started)
				<-ctx.Done()
				held <- poll.Throughout(300*time.Millisecond, func() bool {
					h, ok, err := store.Inspect(context.Background(), "leader")
					return err == nil && ok && h.Token == l.Token()
				})
			},
		})
	}()
	poll.Receive(t, "OnStartedLeading", patience, started)
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	if !poll.Receive(t, "OnStartedLeading returning", patience, held) {
		t.Error("the leadership lease was released while OnStartedLeading still ran after Manager.Close")
	}
	if err := poll.Receive(t, "Close returning", patience, closed); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := poll.Receive(t, "Run returning", patience, ran); !errors.Is(err, leasehold.ErrClosed) {
		t.Errorf("Run = %v, want ErrClosed", err)
	}
	if _, ok, _ := store.Inspect(context.Background(), "leader"); ok {
		t.Error("the leadership lease is still held after Close")
	}
}

// Run refuses, before any backend call, every option that would break "one
// leader, kept while it leads" or that it decides itself.
func TestRunRefusesOptionsItCannotHonour(t *testing.T) {
	store := memory.New()
	m, err := leasehold.New(store)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	for name, opt := range map[string]leasehold.AcquireOption{
		"WithLimit":        leasehold.WithLimit(2),
		"WithoutAutoRenew": leasehold.WithoutAutoRenew(),
		"WithWait":         leasehold.WithWait(time.Second),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		err := election.Run(ctx, m, "leader", election.Callbacks{
			OnStartedLeading: func(context.Context) { t.Errorf("%s: led", name); cancel() },
		}, opt)
		cancel()
		if !errors.Is(err, leasehold.ErrInvalidOption) {
			t.Errorf("Run(%s) = %v, want ErrInvalidOption", name, err)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("Run(%s) = %q, want the option named", name, err)
		}
	}
	if _, ok, _ := store.Inspect(context.Background(), "leader"); ok {
		t.Error("a refused Run acquired the lease")
	}
	// What it accepts still leads.
	ctx, cancel := context.WithCancel(context.Background())
	err = election.Run(ctx, m, "leader", election.Callbacks{
		OnStartedLeading: func(context.Context) { cancel() },
	}, leasehold.WithTTL(2*time.Second), leasehold.WithRenewEvery(500*time.Millisecond), leasehold.WithMetadata("m"))
	if err != nil || ctx.Err() == nil {
		t.Errorf("Run with accepted options = %v, led: %v", err, ctx.Err() != nil)
	}
}
