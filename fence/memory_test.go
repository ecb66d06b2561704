package fence_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/fencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemory(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Guard { return fencetest.StoreGuard(fence.NewMemory()) })
}
