package sqlserver

import (
	"context"
	"errors"
	"log/slog"
)

// logFailure logs a failed operation: as a warning when the store failed, and
// only at debug level when the caller's context ended, which is the caller's
// decision rather than a fault.
func (b *Backend) logFailure(ctx context.Context, msg string, err error, attrs ...any) {
	level := slog.LevelWarn
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		level = slog.LevelDebug
	}
	b.log.Log(ctx, level, msg, append(attrs, "err", err)...)
}
