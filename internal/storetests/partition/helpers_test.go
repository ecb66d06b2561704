package partition_test

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience bounds every wait for something that must happen: generous, so
// that a loaded machine does not fail a test, and finite, so that a broken
// one fails rather than hangs.
const patience = 30 * time.Second

func await[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("%s did not happen within %v", what, patience)
		var zero T
		return zero
	}
}

// uniqueGroup names a group no earlier run used, for the shared stores.
func uniqueGroup(what string) string {
	return fmt.Sprintf("partition-%s-%d", what, time.Now().UnixNano())
}
