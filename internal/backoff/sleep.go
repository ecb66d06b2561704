package backoff

import (
	"context"
	"time"
)

// Sleep waits for d, the pause before a retry, or returns ctx's error when
// ctx ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
