package etcd_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/etcd/internal/etcdtest"
	"github.com/leasehold/leasehold/internal/poll"
)

// failoverTTL is the TTL of the leases the failover tests hold: two of the
// test clusters' minimum, renewed every third of it.
const failoverTTL = 2 * time.Second

func acquireAll(t *testing.T, m *leasehold.Manager, n int, ttl time.Duration) (ls []*leasehold.Lease, maxToken uint64) {
	t.Helper()
	for i := range n {
		l, err := m.Acquire(ctxT(t, 10*time.Second), fmt.Sprint("job-", i), leasehold.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		ls = append(ls, l)
		maxToken = max(maxToken, l.Token())
	}
	return ls, maxToken
}

// TestLeaderKilledWhileLeasesHeld kills the leader (SIGKILL) while one
// Manager holds leases and another waits for each of them. No name may have
// two holders at once (checked by every waiter when it is granted), every
// holder either keeps its lease (a renewal confirmed by the new leader) or is
// told it lost it, and tokens keep increasing past the failover.
func TestLeaderKilledWhileLeasesHeld(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	holder := newManager(t, newBackend(t, c.Client()), "holder")
	waiter := newManager(t, newBackend(t, c.Client()), "waiter")
	ls, maxToken := acquireAll(t, holder, 10, failoverTTL)
	taken := waiters(t, waiter, ls, failoverTTL)

	killed := time.Now()
	c.Leader().Kill()
	c.WaitHealthy()
	// Every lease ends up either renewed after the failover (its backend
	// expiry moved past what the old leader could have granted) or lost.
	for _, l := range ls {
		poll.Until(t, l.Name()+" to be renewed after the failover or lost", 4*failoverTTL, func() bool {
			return l.Err() != nil || l.ExpiresAt().After(killed.Add(failoverTTL))
		})
	}
	kept := 0
	for _, l := range ls {
		if l.Err() == nil {
			if err := l.Renew(ctxT(t, 10*time.Second), 0); err != nil && !errors.Is(err, leasehold.ErrLost) {
				t.Errorf("%s: Renew after the failover: %v", l.Name(), err)
			}
		}
		if l.Err() == nil {
			kept++
		} else if !errors.Is(l.Err(), leasehold.ErrLost) {
			t.Errorf("%s ended with %v, want held or ErrLost", l.Name(), l.Err())
		}
	}
	t.Logf("%d of %d leases kept through the failover", kept, len(ls))
	// Waiters got exactly the lost ones.
	for range len(ls) - kept {
		select {
		case <-taken:
		case <-time.After(4 * failoverTTL):
			t.Fatal("a lost lease was not taken over by its waiter")
		}
	}
	l, err := waiter.Acquire(ctxT(t, 10*time.Second), "after-failover", leasehold.WithTTL(failoverTTL))
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= maxToken {
		t.Errorf("token after the failover %d, want > %d", l.Token(), maxToken)
	}
}

// TestPartitionedMemberClientsFailClosed cuts the leader off (SIGSTOP: it
// answers nobody, neither its clients nor its peers) while a Manager whose
// client knows only that member holds leases. Its leases must be lost by the
// holder's local deadline, within the TTL of the cut, and only then be
// granted to a Manager on the other two members, with higher tokens.
func TestPartitionedMemberClientsFailClosed(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	cut := c.Leader()
	var rest []string
	for _, m := range c.Members {
		if m != cut {
			rest = append(rest, m.ClientURL)
		}
	}
	holder := newManager(t, newBackend(t, c.Client(cut.ClientURL)), "cut-off")
	other := newManager(t, newBackend(t, c.Client(rest...)), "majority")
	ls, _ := acquireAll(t, holder, 5, failoverTTL)
	taken := waiters(t, other, ls, failoverTTL)

	cutAt := time.Now()
	cut.Pause()
	t.Cleanup(cut.Resume) // before the Managers close
	for _, l := range ls {
		select {
		case <-l.Lost():
		case <-time.After(failoverTTL + time.Second):
			t.Fatalf("%s still held %v after its member was cut off (TTL %v)", l.Name(), time.Since(cutAt), failoverTTL)
		}
		if d := time.Since(cutAt); d > failoverTTL+500*time.Millisecond {
			t.Errorf("%s lost %v after the cut, later than its TTL %v", l.Name(), d, failoverTTL)
		}
	}
	// The majority elects a leader, which ends the leases by their TTL
	// (counted again from its election) and lets the waiters in.
	for range ls {
		select {
		case <-taken:
		case <-time.After(15 * time.Second):
			t.Fatal("the majority's waiter did not get a lease the cut-off member's client lost")
		}
	}
}

// TestFullClusterRestartWithData kills every member at once (SIGKILL, no
// clean shutdown) and starts them again on their data: holdings, their
// tokens and their leases survive (etcd writes every change to a majority's
// disk before answering), their holders keep them, and new tokens continue
// above the old ones.
func TestFullClusterRestartWithData(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	const ttl = 20 * time.Second // longer than the outage
	b := newBackend(t, c.Client())
	holder := newManager(t, b, "holder")
	ls, maxToken := acquireAll(t, holder, 5, ttl)

	for _, m := range c.Members {
		m.Kill()
	}
	for _, m := range c.Members {
		c.Restart(m)
	}
	c.WaitHealthy()
	other := newManager(t, newBackend(t, c.Client()), "other")
	for _, l := range ls {
		// The holder's client reconnects by itself; renew until it has.
		poll.Until(t, l.Name()+" renewed after the restart", 10*time.Second, func() bool {
			return l.Renew(ctxT(t, 2*time.Second), 0) == nil
		})
		info, held, err := other.Inspect(ctxT(t, 5*time.Second), l.Name())
		if err != nil || !held || info.Owner != "holder" || info.Token != l.Token() {
			t.Errorf("%s after the restart: %+v, held %v, %v; want the holder's token %d", l.Name(), info, held, err, l.Token())
		}
		if _, err := other.Acquire(ctxT(t, 5*time.Second), l.Name()); !errors.Is(err, leasehold.ErrNotAcquired) {
			t.Errorf("%s acquired by another owner after the restart: %v", l.Name(), err)
		}
	}
	l, err := other.Acquire(ctxT(t, 10*time.Second), "after-restart", leasehold.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= maxToken {
		t.Errorf("token after the restart %d, want > %d", l.Token(), maxToken)
	}
}

// TestMemberReplacedWithoutData: a member loses its disk and comes back
// empty, replaced the way etcd's runbook says (member remove, member add,
// start with --initial-cluster-state existing). It catches up from the
// others: the holdings, their tokens and their holders' renewals all
// survive, even through a client that knows only the new member, and tokens
// keep increasing.
func TestMemberReplacedWithoutData(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	const ttl = 20 * time.Second // longer than the replacement
	holder := newManager(t, newBackend(t, c.Client()), "holder")
	ls, maxToken := acquireAll(t, holder, 5, ttl)

	var lost *etcdtest.Member
	var rest []string
	leader := c.Leader()
	for _, m := range c.Members {
		if m != leader && lost == nil {
			lost = m
			continue
		}
		rest = append(rest, m.ClientURL)
	}
	id := lost.ID()
	lost.Kill()
	if err := lost.WipeData(); err != nil {
		t.Fatal(err)
	}
	admin := c.Client(rest...)
	if _, err := admin.MemberRemove(ctxT(t, 10*time.Second), id); err != nil {
		t.Fatalf("member remove: %v", err)
	}
	// etcd refuses to add a member until the others have been connected
	// for a while (5s): ask until it agrees.
	poll.Until(t, "member add to be accepted", 20*time.Second, func() bool {
		_, err := admin.MemberAdd(ctxT(t, 5*time.Second), []string{lost.PeerURL})
		return err == nil
	})
	c.Restart(lost)
	c.WaitHealthy()

	only := newManager(t, newBackend(t, c.Client(lost.ClientURL)), "reader")
	for _, l := range ls {
		if err := l.Renew(ctxT(t, 10*time.Second), 0); err != nil {
			t.Errorf("%s: Renew after the replacement: %v", l.Name(), err)
		}
		info, held, err := only.Inspect(ctxT(t, 10*time.Second), l.Name())
		if err != nil || !held || info.Owner != "holder" || info.Token != l.Token() {
			t.Errorf("%s through the new member: %+v, held %v, %v; want the holder's token %d", l.Name(), info, held, err, l.Token())
		}
	}
	nl, err := only.Acquire(ctxT(t, 10*time.Second), "after-replacement", leasehold.WithTTL(failoverTTL))
	if err != nil {
		t.Fatal(err)
	}
	if nl.Token() <= maxToken {
		t.Errorf("token through the new member %d, want > %d", nl.Token(), maxToken)
	}
}
