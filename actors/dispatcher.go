package actors

import (
	"runtime"
	"sync"
)

// pool is the dispatcher of one Manager's actors: a few long-lived goroutines
// run mailboxes. protoactor's default dispatcher starts a goroutine for every
// mailbox run, and each new goroutine grows its stack again through the
// actor's call depth; measured, that stack copying was over 40% of an
// acquire+release cycle on the memory backend. When every worker is busy a run
// gets a goroutine of its own, so a slow actor never delays the others.
type pool struct {
	work chan func()
	wg   sync.WaitGroup
	mu   sync.RWMutex
	done bool
}

// throughput is how many messages a mailbox run handles before yielding.
const throughput = 300

func newPool() *pool {
	n := max(4, 2*runtime.GOMAXPROCS(0))
	p := &pool{work: make(chan func(), n)}
	for range n {
		p.wg.Go(func() {
			for fn := range p.work {
				fn()
			}
		})
	}
	return p
}

func (p *pool) Schedule(fn func()) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.done {
		select {
		case p.work <- fn:
			return
		default:
		}
	}
	go fn()
}

func (p *pool) Throughput() int { return throughput }

// stop ends the workers once the actors are gone; later runs (none are
// expected) get goroutines of their own.
func (p *pool) stop() {
	p.mu.Lock()
	if !p.done {
		p.done = true
		close(p.work)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
