// Package frozen_test proves the fencing guards against a real frozen
// holder: a child process that holds a lease is stopped (SIGSTOP) past its
// TTL, another holder is granted the name and writes, and the child, let go
// again (SIGCONT), writes with its old token.
package frozen_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
