package engine

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// mailbox is the mailbox of every actor of a Manager: protoactor's default
// one (system messages first, suspension, the dispatcher's throughput, a
// panic escalated to the supervisor), less its allocations. protoactor's
// makes a method value each time it schedules an idle mailbox and a queue
// node for each message, about a dozen allocations per acquire+release
// cycle; this one makes its run function once and reuses its queues'
// arrays.
type mailbox struct {
	mu     sync.Mutex // guards user and system
	user   fifo
	system fifo

	running      atomic.Bool
	userMessages atomic.Int32
	sysMessages  atomic.Int32
	suspended    atomic.Bool

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	process    func() // processMessages, made once
}

var _ actor.Mailbox = (*mailbox)(nil)

// newMailbox is the actor.MailboxProducer of the engine's actors.
func newMailbox() actor.Mailbox {
	m := &mailbox{}
	m.process = m.processMessages
	return m
}

func (m *mailbox) PostUserMessage(message any) {
	// A batch's messages are posted one by one, then the batch itself, as
	// protoactor's mailbox does.
	if batch, ok := message.(actor.MessageBatch); ok {
		for _, msg := range batch.GetMessages() {
			m.PostUserMessage(msg)
		}
	}
	if env, ok := message.(*actor.MessageEnvelope); ok {
		if batch, ok := env.Message.(actor.MessageBatch); ok {
			for _, msg := range batch.GetMessages() {
				m.PostUserMessage(msg)
			}
		}
	}
	m.mu.Lock()
	m.user.push(message)
	m.mu.Unlock()
	m.userMessages.Add(1)
	m.schedule()
}

func (m *mailbox) PostSystemMessage(message any) {
	m.mu.Lock()
	m.system.push(message)
	m.mu.Unlock()
	m.sysMessages.Add(1)
	m.schedule()
}

func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.dispatcher = dispatcher
}

func (m *mailbox) Start() {}

func (m *mailbox) UserMessageCount() int { return int(m.userMessages.Load()) }

func (m *mailbox) schedule() {
	if m.running.CompareAndSwap(false, true) {
		m.dispatcher.Schedule(m.process)
	}
}

func (m *mailbox) processMessages() {
	for {
		m.run()
		m.running.Store(false)
		// A message posted after run found the queues empty scheduled
		// nothing (the mailbox was running): take it now, unless another
		// goroutine has scheduled the mailbox meanwhile.
		// (A count may dip below zero while a message's poster has pushed
		// it but not yet counted it: it was taken already.)
		sys, user := m.sysMessages.Load(), m.userMessages.Load()
		if sys <= 0 && (m.suspended.Load() || user <= 0) {
			return
		}
		if !m.running.CompareAndSwap(false, true) {
			return
		}
	}
}

func (m *mailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		m.mu.Lock()
		msg = m.system.pop()
		m.mu.Unlock()
		if msg != nil {
			m.sysMessages.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return
		}
		m.mu.Lock()
		msg = m.user.pop()
		m.mu.Unlock()
		if msg == nil {
			return
		}
		m.userMessages.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

// fifo is a queue of messages that keeps its array while it drains, so that
// a mailbox that sees a message or two at a time allocates nothing.
type fifo struct {
	buf  []any
	head int
}

// fifoKeep is the largest array an empty fifo keeps: a burst of messages
// must not pin its memory on an actor that then idles.
const fifoKeep = 16

func (q *fifo) push(msg any) {
	// A queue that never quite drains moves its live part to the front
	// before it grows, rather than grow by its dead prefix forever.
	if q.head > 0 && len(q.buf) == cap(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf = q.buf[:n]
		q.head = 0
	}
	q.buf = append(q.buf, msg)
}

func (q *fifo) pop() any {
	if q.head == len(q.buf) {
		return nil
	}
	msg := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
		if cap(q.buf) > fifoKeep {
			q.buf = nil
		} else {
			q.buf = q.buf[:0]
		}
	}
	return msg
}
