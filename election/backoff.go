package election

import (
	"math/rand/v2"
	"time"
)

// backoff spaces out campaigns after backend failures: 100 ms doubling to 5 s,
// with jitter so that a fleet does not retry in step.
type backoff struct{ n int }

func newBackoff() *backoff { return &backoff{} }

func (b *backoff) reset() { b.n = 0 }

func (b *backoff) next() time.Duration {
	d := min(100*time.Millisecond<<min(b.n, 6), 5*time.Second)
	b.n++
	return d/2 + rand.N(d/2)
}
