package partition_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/poll"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience bounds every wait for something that must happen: generous, so
// that a loaded machine does not fail a test, and finite, so that a broken
// one fails rather than hangs.
const patience = 30 * time.Second

// await waits for a value on ch, for at most patience.
func await[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	return poll.Receive(t, what, patience, ch)
}

// fleetItems are the n items of a group (the fleet tests, on memory and on
// the local stores, are in internal/storetests/partition).
func fleetItems(n int) []string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("item-%03d", i)
	}
	return items
}
