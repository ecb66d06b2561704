package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
)

func TestIsTransient(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	yes := map[string]error{
		"deadlock victim":         mssql.Error{Number: 1205},
		"database unavailable":    mssql.Error{Number: 40613},
		"service busy":            mssql.Error{Number: 40501},
		"not enough resources":    mssql.Error{Number: 49918},
		"deadlock among the errs": mssql.Error{Number: 3621, All: []mssql.Error{{Number: 1205}, {Number: 3621}}},
		// An availability group replica changing role.
		"AG database not accessible":    mssql.Error{Number: 976},
		"AG replica not readable":       mssql.Error{Number: 978},
		"AG role not yet resolved":      mssql.Error{Number: 983},
		"AG role change among the errs": mssql.Error{Number: 3621, All: []mssql.Error{{Number: 983}, {Number: 3621}}},
		// How go-mssqldb v1.11 reports a dropped connection (see isDropped
		// and the driver's checkBadConn, processSingleResponse, tdsBuffer):
		"bad conn":                            driver.ErrBadConn,
		"bad conn, wrapped":                   fmt.Errorf("sqlserver: acquire: %w", driver.ErrBadConn),
		"retryable error (Is ErrBadConn)":     mssql.RetryableError{},
		"stream error: EOF mid-response":      mssql.StreamError{InnerError: io.EOF},
		"stream error: unexpected EOF":        mssql.StreamError{InnerError: io.ErrUnexpectedEOF},
		"stream error: connection reset":      mssql.StreamError{InnerError: reset},
		"stream error, wrapped":               fmt.Errorf("x: %w", mssql.StreamError{InnerError: io.EOF}),
		"server error (fatal, session ended)": mssql.ServerError{},
		"net.OpError: reset on first read":    reset,
		"net.OpError: read of a closed pipe":  &net.OpError{Op: "Read", Err: io.EOF},
		"EOF":                                 io.EOF,
		"unexpected EOF":                      io.ErrUnexpectedEOF,
	}
	no := map[string]error{
		"primary key violation":  mssql.Error{Number: 2627},
		"invalid object name":    mssql.Error{Number: 208},
		"permission denied":      mssql.Error{Number: 229},
		"durability guard":       mssql.Error{Number: errDelayedDurabilityNumber},
		"a number in the text":   errors.New("mssql: 1205"),
		"text says reset":        errors.New("read tcp: connection reset by peer"),
		"canceled":               context.Canceled,
		"deadline (a net.Error)": context.DeadlineExceeded,
		"wrapped deadline":       fmt.Errorf("x: %w", context.DeadlineExceeded),
		// SqlClient's client-side numbers for a dropped connection: the
		// server never sends them and go-mssqldb never makes them, so they
		// mean nothing special here.
		"SqlClient 10054": mssql.Error{Number: 10054},
		"SqlClient 10053": mssql.Error{Number: 10053},
		"SqlClient 121":   mssql.Error{Number: 121},
	}
	for name, err := range yes {
		if !isTransient(err) {
			t.Errorf("isTransient(%s) = false", name)
		}
	}
	for name, err := range no {
		if isTransient(err) {
			t.Errorf("isTransient(%s) = true", name)
		}
	}
}

// TestIsTransientRealDriverErrors gets errors from go-mssqldb itself, by
// connecting to a local port that closes every connection after reading the
// prelogin (the driver reports io.EOF) and to a port nobody listens on (a
// *net.OpError). A dropped connection in the middle of a batch needs a TDS
// server and is covered by the driver's values in TestIsTransient.
func TestIsTransientRealDriverErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 512))
			c.Close()
		}
	}()
	closed := ln.Addr().String()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := refused.Addr().String()
	refused.Close()
	t.Cleanup(func() { ln.Close(); <-done })

	for _, addr := range []string{closed, nobody} {
		db, err := sql.Open("sqlserver", "sqlserver://sa:x@"+addr+"?encrypt=disable&dial+timeout=5")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
		if err == nil || !isTransient(err) {
			t.Errorf("driver error from %s: %T %v, want transient", addr, err, err)
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

var renewReq = backend.RenewRequest{Key: "k", Owner: "o", Attempt: "a", Token: 5, TTL: time.Second}

func renewRow() *sqlmock.Rows {
	return sqlmock.NewRows([]string{"FencingToken", "ExpiresAtUtc"}).AddRow(int64(5), time.Now())
}

// TestRetryRunsTheWholeBatchAgain: a deadlock victim's batch is sent again,
// whole, and succeeds.
func TestRetryRunsTheWholeBatchAgain(t *testing.T) {
	b, mock := newMockBackend(t)
	req := backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: time.Second}
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).WillReturnError(mssql.Error{Number: 1205, Message: "deadlock victim"})
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).WillReturnError(mssql.Error{Number: 40613})
	// The connection drops while the answer is read: the batch may have
	// committed, and running it again refreshes the same attempt's holding.
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).WillReturnError(mssql.StreamError{InnerError: io.ErrUnexpectedEOF})
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).
		WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(1), "o", int64(9), time.Now(), make([]byte, 8), nil, false, nil))
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
		WithArgs(cancelOnMatch{cancel}, sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg(), sqlmock.AnyArg()).
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

// TestRetryAvailabilityGroupRoleChange: a batch refused while its replica
// changes role (976, 978, 983) is sent again and succeeds.
func TestRetryAvailabilityGroupRoleChange(t *testing.T) {
	b, mock := newMockBackend(t)
	for _, n := range []int32{976, 978, 983} {
		mock.ExpectQuery(b.q.renew).WillReturnError(mssql.Error{Number: n, Message: "availability group role change"})
	}
	mock.ExpectQuery(b.q.renew).WillReturnRows(renewRow())
	if g, err := b.Renew(context.Background(), renewReq); err != nil || g.Token != 5 {
		t.Fatalf("Renew = %+v, %v; want renewed after the role change", g, err)
	}
}
