package actors

import (
	"sync"

	"github.com/leasehold/leasehold/messages"
)

// HeldSet is the set of holdings a Manager has now, kept by the lease actors so
// that Manager.Held can answer without a round trip through every actor.
type HeldSet struct {
	mu sync.Mutex
	m  map[*messages.Holding]struct{}
}

// NewHeldSet returns an empty set.
func NewHeldSet() *HeldSet { return &HeldSet{m: map[*messages.Holding]struct{}{}} }

func (s *HeldSet) add(h *messages.Holding) {
	s.mu.Lock()
	s.m[h] = struct{}{}
	s.mu.Unlock()
}

func (s *HeldSet) remove(h *messages.Holding) {
	s.mu.Lock()
	delete(s.m, h)
	if len(s.m) == 0 {
		s.m = map[*messages.Holding]struct{}{} // Go maps never shrink
	}
	s.mu.Unlock()
}

// Snapshot lists the holdings held now, in no particular order.
func (s *HeldSet) Snapshot() []*messages.Holding {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*messages.Holding, 0, len(s.m))
	for h := range s.m {
		out = append(out, h)
	}
	return out
}
