package sqlserver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/leasehold/leasehold/backend"
)

// TestLogLevels: a busy lease and an ended context log no warning; a store
// fault does.
func TestLogLevels(t *testing.T) {
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "a", TTL: time.Second}
	cases := []struct {
		name     string
		expect   func(b *Backend, mock sqlmock.Sqlmock, cancel context.CancelFunc)
		wantWarn bool
	}{
		{"busy", func(b *Backend, mock sqlmock.Sqlmock, _ context.CancelFunc) {
			mock.ExpectQuery(b.q.acquire).WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeBusy), "other", int64(1), time.Now(), nil, int64(1000), false, nil))
		}, false},
		{"context ended", func(b *Backend, mock sqlmock.Sqlmock, cancel context.CancelFunc) {
			mock.ExpectQuery(b.q.acquire).
				WithArgs(cancelOnMatch{cancel}, sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg()).
				WillReturnError(deadlockErr)
		}, false},
		{"fault", func(b *Backend, mock sqlmock.Sqlmock, _ context.CancelFunc) {
			mock.ExpectQuery(b.q.acquire).WillReturnError(errors.New("login failed"))
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			b, mock := newMockBackend(t, WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.expect(b, mock, cancel)
			_, _ = b.Acquire(ctx, req)
			if got := strings.Contains(buf.String(), "level=WARN"); got != c.wantWarn {
				t.Errorf("warning logged = %t, want %t:\n%s", got, c.wantWarn, buf.String())
			}
		})
	}
}
