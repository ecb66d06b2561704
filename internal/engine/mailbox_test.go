package engine

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// recorder is a MessageInvoker that records what it is given.
type recorder struct {
	mu        sync.Mutex
	user, sys []any
	failures  []any
	onUser    func(msg any)
}

func (r *recorder) InvokeSystemMessage(msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sys = append(r.sys, msg)
}

func (r *recorder) InvokeUserMessage(msg any) {
	r.mu.Lock()
	r.user = append(r.user, msg)
	f := r.onUser
	r.mu.Unlock()
	if f != nil {
		f(msg)
	}
}

func (r *recorder) EscalateFailure(reason any, msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, reason, msg)
}

func TestMailboxKeepsOrderAndRunsSystemMessagesFirst(t *testing.T) {
	m := newMailbox().(*mailbox)
	r := &recorder{}
	m.RegisterHandlers(r, actor.NewSynchronizedDispatcher(throughput))
	// Messages posted while the mailbox runs queue behind the one being
	// handled, system messages ahead of user ones.
	r.onUser = func(msg any) {
		if msg == 0 {
			for i := 1; i <= 40; i++ {
				m.PostUserMessage(i)
			}
			m.PostSystemMessage("sys")
		}
	}
	m.PostUserMessage(0)
	if len(r.sys) != 1 || len(r.user) != 41 {
		t.Fatalf("got %d system and %d user messages, want 1 and 41", len(r.sys), len(r.user))
	}
	for i, msg := range r.user {
		if msg != i {
			t.Fatalf("user message %d is %v", i, msg)
		}
	}
	if m.UserMessageCount() != 0 || m.sysMessages.Load() != 0 || m.running.Load() {
		t.Fatalf("not idle: %d user, %d system, running %v", m.UserMessageCount(), m.sysMessages.Load(), m.running.Load())
	}
	if len(m.user.buf) != 0 || cap(m.user.buf) > fifoKeep {
		t.Fatalf("drained queue keeps len %d cap %d", len(m.user.buf), cap(m.user.buf))
	}
}

func TestMailboxSuspendsUserMessages(t *testing.T) {
	m := newMailbox().(*mailbox)
	r := &recorder{}
	m.RegisterHandlers(r, actor.NewSynchronizedDispatcher(throughput))
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostUserMessage("held")
	if len(r.user) != 0 {
		t.Fatalf("a suspended mailbox handled %v", r.user)
	}
	m.PostSystemMessage(&actor.ResumeMailbox{})
	if len(r.user) != 1 || len(r.sys) != 0 {
		t.Fatalf("after resume: user %v, system %v", r.user, r.sys)
	}
}

func TestMailboxEscalatesAPanicAndGoesOn(t *testing.T) {
	m := newMailbox().(*mailbox)
	r := &recorder{}
	r.onUser = func(msg any) {
		if msg == "boom" {
			panic("bang")
		}
	}
	m.RegisterHandlers(r, actor.NewSynchronizedDispatcher(throughput))
	m.PostUserMessage("boom")
	if len(r.failures) != 2 || r.failures[0] != "bang" || r.failures[1] != "boom" {
		t.Fatalf("failures %v", r.failures)
	}
	m.PostUserMessage("next")
	if len(r.user) != 2 || r.user[1] != "next" {
		t.Fatalf("after the panic: %v", r.user)
	}
}

// Many senders, each message handled once and each sender's in its order.
func TestMailboxConcurrentSenders(t *testing.T) {
	m := newMailbox().(*mailbox)
	r := &recorder{}
	m.RegisterHandlers(r, actor.NewSynchronizedDispatcher(3))
	type msg struct{ from, n int }
	const senders, each = 8, 2000
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for n := range each {
				m.PostUserMessage(msg{s, n})
			}
		})
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.user) != senders*each {
		t.Fatalf("handled %d messages, want %d", len(r.user), senders*each)
	}
	next := make([]int, senders)
	for _, u := range r.user {
		v := u.(msg)
		if v.n != next[v.from] {
			t.Fatalf("sender %d: got %d, want %d", v.from, v.n, next[v.from])
		}
		next[v.from]++
	}
}

func TestFifoThatNeverDrainsStaysBounded(t *testing.T) {
	var q fifo
	q.push(0)
	for i := 1; i < 10000; i++ {
		q.push(i)
		if got := q.pop(); got != i-1 {
			t.Fatalf("pop %d: got %v", i-1, got)
		}
	}
	if cap(q.buf) > 8 {
		t.Fatalf("one live message in an array of %d", cap(q.buf))
	}
}

func TestMailboxAllocatesNothingPerMessage(t *testing.T) {
	m := newMailbox().(*mailbox)
	m.RegisterHandlers(&recorder{}, actor.NewSynchronizedDispatcher(throughput))
	msg := any(&struct{ x int }{})
	rec := m.invoker.(*recorder)
	if n := testing.AllocsPerRun(100, func() {
		rec.user = rec.user[:0]
		m.PostUserMessage(msg)
	}); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
}
