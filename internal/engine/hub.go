package engine

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/protocol"
)

// hub fans loss events out to subscribers. Delivery never blocks: a full
// subscriber buffer drops the event and the subscription counts it.
type hub struct {
	sinks map[*lease.Sink]struct{}
}

func newHub() actor.Actor { return &hub{sinks: map[*lease.Sink]struct{}{}} }

func (h *hub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *protocol.Subscribe:
		h.sinks[m.Sink] = struct{}{}
	case *protocol.Unsubscribe:
		delete(h.sinks, m.Sink)
		m.Sink.Close()
	case *protocol.Publish:
		for s := range h.sinks {
			s.Deliver(m.Event)
		}
	case *actor.Stopping:
		for s := range h.sinks {
			s.Close()
		}
		clear(h.sinks)
	}
}
