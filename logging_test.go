package leasehold_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
)

// lockedBuffer is a bytes.Buffer safe for the handler's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The engine's plumbing (protoactor's "actor system started") logs at Debug:
// an application logging at Info sees nothing from a Manager that just works,
// and sees it all at Debug.
func TestWithLoggerKeepsPlumbingAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var out lockedBuffer
		logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level}))
		m, err := leasehold.New(memory.New(), leasehold.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Acquire(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		started := strings.Contains(out.String(), "actor system started")
		if level == slog.LevelInfo && out.String() != "" {
			t.Errorf("at Info, a Manager that just works logged:\n%s", out.String())
		}
		if level == slog.LevelDebug && !started {
			t.Errorf("at Debug, protoactor's start is not logged:\n%s", out.String())
		}
	}
}
