package fence

import (
	"context"
	"sync"

	"github.com/leasehold/leasehold"
)

// Memory is a Store in the memory of one process: right when that process
// is the only writer of its resources. It forgets everything when the
// process ends, so a resource that outlives the process needs the guard of
// its own store instead.
type Memory struct {
	mu      sync.Mutex
	highest map[string]uint64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{highest: make(map[string]uint64)} }

// Check implements Store.
func (m *Memory) Check(ctx context.Context, resource string, token uint64) error {
	if err := Validate(resource, token); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.highest[resource]; token < h {
		return &leasehold.StaleTokenError{Resource: resource, Token: token, Highest: h}
	}
	m.highest[resource] = token
	return nil
}
