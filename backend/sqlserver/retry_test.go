package sqlserver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
)

func TestIsTransient(t *testing.T) {
	yes := []error{
		mssql.Error{Number: 1205},
		mssql.Error{Number: 40613},
		mssql.Error{Number: 40501},
		mssql.Error{Number: 49918},
		fmt.Errorf("wrapped: %w", mssql.Error{Number: 10054}),
		mssql.Error{Number: 3621, All: []mssql.Error{{Number: 1205}, {Number: 3621}}},
		driver.ErrBadConn,
	}
	no := []error{
		mssql.Error{Number: 2627}, // primary key violation
		mssql.Error{Number: 208},  // invalid object name
		mssql.Error{Number: 229},  // permission denied
		errors.New("mssql: 1205"),
		context.Canceled,
		context.DeadlineExceeded,
	}
	for _, err := range yes {
		if !isTransient(err) {
			t.Errorf("isTransient(%v) = false", err)
		}
	}
	for _, err := range no {
		if isTransient(err) {
			t.Errorf("isTransient(%v) = true", err)
		}
	}
}

func TestRetryDelayIsCappedAndJittered(t *testing.T) {
	p := retryPolicy{attempts: 10, base: 10 * time.Millisecond, max: 80 * time.Millisecond}
	for n := 1; n <= 40; n++ {
		ceiling := min(p.max, p.base<<min(n-1, 20))
		seen := map[time.Duration]bool{}
		for range 50 {
			d := p.delay(n)
			if d < ceiling/2 || d > ceiling {
				t.Fatalf("delay(%d) = %v, want within [%v, %v]", n, d, ceiling/2, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("delay(%d) is not jittered", n)
		}
	}
}

var renewReq = backend.RenewRequest{Key: "k", Owner: "o", Token: 5, TTL: time.Second}

func renewRow() *sqlmock.Rows {
	return sqlmock.NewRows([]string{"FencingToken", "ExpiresAtUtc"}).AddRow(int64(5), time.Now())
}

// TestRetryRunsTheWholeBatchAgain: a deadlock victim's batch is sent again,
// whole, and succeeds.
func TestRetryRunsTheWholeBatchAgain(t *testing.T) {
	b, mock := newMockBackend(t)
	req := backend.AcquireRequest{Key: "k", Owner: "o", TTL: time.Second}
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatchSize)...).WillReturnError(mssql.Error{Number: 1205, Message: "deadlock victim"})
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatchSize)...).WillReturnError(mssql.Error{Number: 40613})
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatchSize)...).
		WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(1), "o", int64(9), time.Now(), make([]byte, 8)))
	g, err := b.Acquire(context.Background(), req)
	if err != nil || !g.Acquired || g.Token != 9 {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
}

func TestRetryStopsAfterAttempts(t *testing.T) {
	b, mock := newMockBackend(t, WithRetry(3, time.Microsecond, time.Microsecond))
	for range 3 {
		mock.ExpectQuery(b.q.renew).WillReturnError(mssql.Error{Number: 1205})
	}
	_, err := b.Renew(context.Background(), renewReq)
	var me mssql.Error
	if !errors.As(err, &me) || me.Number != 1205 || errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("err = %v, want the last deadlock error", err)
	}
}

func TestRetryDoesNotRetryOtherErrors(t *testing.T) {
	b, mock := newMockBackend(t)
	mock.ExpectQuery(b.q.renew).WillReturnError(mssql.Error{Number: 208, Message: "Invalid object name"})
	if _, err := b.Renew(context.Background(), renewReq); err == nil {
		t.Fatal("want an error")
	}
}

// TestRetryNeverPastTheDeadline: when the pause would outlast the context's
// deadline, the error is returned at once.
func TestRetryNeverPastTheDeadline(t *testing.T) {
	b, mock := newMockBackend(t, WithRetry(5, time.Hour, time.Hour))
	mock.ExpectQuery(b.q.renew).WillReturnError(mssql.Error{Number: 1205})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := b.Renew(ctx, renewReq)
	if !isTransient(err) || time.Since(start) > 10*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

// cancelOnMatch is an argument matcher that cancels a context when the query
// reaches the driver: a signal that the batch is in flight.
type cancelOnMatch struct{ cancel context.CancelFunc }

func (c cancelOnMatch) Match(driver.Value) bool { c.cancel(); return true }

// TestRetryNeverRetriesContextErrors: a batch that fails with a transient
// error after ctx ended is not sent again, and the error says why.
func TestRetryNeverRetriesContextErrors(t *testing.T) {
	b, mock := newMockBackend(t)
	ctx, cancel := context.WithCancel(context.Background())
	mock.ExpectQuery(b.q.renew).
		WithArgs(cancelOnMatch{cancel}, sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg()).
		WillReturnError(mssql.Error{Number: 1205})
	_, err := b.Renew(ctx, renewReq)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// signalHandler is a slog.Handler that reports records with a given message.
type signalHandler struct {
	msg string
	ch  chan<- slog.Record
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h signalHandler) WithGroup(string) slog.Handler            { return h }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- r:
		default:
		}
	}
	return nil
}

// TestRetryPauseEndsWithContext: a cancel during the backoff pause ends the
// retry loop at once, without another attempt.
func TestRetryPauseEndsWithContext(t *testing.T) {
	pausing := make(chan slog.Record, 1)
	logger := slog.New(signalHandler{msg: "retrying after a transient error", ch: pausing})
	b, mock := newMockBackend(t, WithRetry(5, time.Hour, time.Hour), WithLogger(logger))
	mock.ExpectQuery(b.q.renew).WillReturnError(mssql.Error{Number: 1205})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Renew(ctx, renewReq)
		errc <- err
	}()
	<-pausing
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("retry pause did not end with the context")
	}
}

var deadlockErr = mssql.Error{Number: 1205, Message: "Transaction was deadlocked and has been chosen as the deadlock victim"}
