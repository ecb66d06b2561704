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

// uniqueGroup names a group no earlier run used, for the shared stores.
func uniqueGroup(what string) string {
	return fmt.Sprintf("partition-%s-%d", what, time.Now().UnixNano())
}
