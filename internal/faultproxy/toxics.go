package faultproxy

import (
	"sync"
	"sync/atomic"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// Type names of this package's toxics in toxiproxy's registry.
const (
	toxicDropReply = "faultproxy_drop_reply"
	toxicCut       = "faultproxy_cut"
	toxicStall     = "faultproxy_stall"
	toxicBlackhole = "faultproxy_blackhole"
)

func init() {
	toxics.Register(toxicDropReply, new(dropReplyToxic))
	toxics.Register(toxicCut, new(cutToxic))
	toxics.Register(toxicStall, new(stallToxic))
	toxics.Register(toxicBlackhole, new(blackholeToxic))
}

// toxiproxy makes each toxic's instance itself (from the registered type, when
// it is added), so an instance keeps its own state in fields whose zero value
// is ready; the Proxy reads them through the wrapper that AddToxicJson
// returns.

// dropReplyToxic, on a downstream link, swallows the first reply chunk and
// closes the connection: the server acted, the client cannot know.
type dropReplyToxic struct {
	dropped atomic.Int64
}

func (t *dropReplyToxic) Pipe(stub *toxics.ToxicStub) {
	select {
	case <-stub.Interrupt:
		return
	case c := <-stub.Input:
		if c != nil {
			t.dropped.Add(1)
		}
		stub.Close()
		drain(stub)
	}
}

// existing marks, per link, whether the link was open when an existing-only
// toxic (cut or stall) was added: toxiproxy asks for a link's state when the
// toxic is added to it, for the links open then and for every later one. The
// toxic stays armed until disarm, which the Proxy calls under the toxic
// collection's lock (the lock toxiproxy holds while it starts a link).
type existing struct {
	disarmed atomic.Bool
	mu       sync.Mutex
	hit      []*linkState
}

// linkState is one link's state; done is closed once a cut link's input has
// ended, that is once both of its connections are closed.
type linkState struct {
	hit  bool
	done chan struct{}
}

func (e *existing) NewState() any {
	if e.disarmed.Load() {
		return &linkState{}
	}
	s := &linkState{hit: true, done: make(chan struct{})}
	e.mu.Lock()
	e.hit = append(e.hit, s)
	e.mu.Unlock()
	return s
}

// disarm makes links started from now on pass through, and returns the
// states of the links that were hit.
func (e *existing) disarm() []*linkState {
	e.disarmed.Store(true)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hit
}

// cutToxic closes the links open when it was added; later ones pass through.
type cutToxic struct{ existing }

func (t *cutToxic) Pipe(stub *toxics.ToxicStub) {
	s := stub.State.(*linkState)
	if !s.hit {
		passThrough(stub)
		return
	}
	stub.Close()
	drain(stub)
	close(s.done)
}

// stallToxic discards whatever the links open when it was added carry, and
// keeps them open; later ones pass through.
type stallToxic struct{ existing }

func (t *stallToxic) Pipe(stub *toxics.ToxicStub) {
	if !stub.State.(*linkState).hit {
		passThrough(stub)
		return
	}
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
		}
	}
}

// blackholeToxic swallows whatever its links carry and keeps them open.
// Removed, it closes them (bytes were lost: they are out of step) and goes
// on swallowing what the toxic before it still sends until that one ends:
// toxiproxy's own timeout toxic, removed, leaves the toxic before it blocked
// for ever on the next chunk a client writes at that moment.
type blackholeToxic struct{}

func (t *blackholeToxic) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
		}
	}
}

// Cleanup is called when the toxic is removed (toxics.CleanupToxic).
func (t *blackholeToxic) Cleanup(stub *toxics.ToxicStub) {
	stub.Close()
	go drain(stub)
}

// passThrough forwards every chunk, as toxiproxy's own noop toxic does.
func passThrough(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			stub.Output <- c
		}
	}
}

// drain reads and discards a closed stub's input until it ends. Without it
// the toxic before this one in the chain would block forever on the next
// chunk the link reads (toxiproxy's own closing toxics leave it so).
func drain(stub *toxics.ToxicStub) {
	for c := range stub.Input {
		_ = c
	}
}
