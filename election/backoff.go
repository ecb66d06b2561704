package election

import (
	"time"

	"github.com/leasehold/leasehold/internal/backoff"
)

// campaignBackoff spaces out campaigns after backend failures: 100 ms
// doubling to 5 s, with half jitter so that a fleet does not retry in step
// yet never campaigns again at once against a failing backend.
var campaignBackoff = backoff.Policy{Base: 100 * time.Millisecond, Cap: 5 * time.Second, Jitter: backoff.HalfJitter}

// pacer counts the failures since the last success.
type pacer struct{ n int }

func newBackoff() *pacer { return &pacer{} }

func (b *pacer) reset() { b.n = 0 }

// next is the pause before the next campaign: in [d/2, d) for
// d = min(100ms·2^n, 5s) after n failures.
func (b *pacer) next() time.Duration {
	d := campaignBackoff.Delay(b.n)
	b.n++
	return d
}
