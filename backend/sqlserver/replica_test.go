package sqlserver

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/leasehold/leasehold/backend"
)

var replicaColumns = []string{"RowVersion", "OwnerInstanceId", "FencingToken"}

type replicaFixture struct {
	b       *Backend
	primary sqlmock.Sqlmock
	replica sqlmock.Sqlmock
	log     *bytes.Buffer
	req     backend.AcquireRequest
	rv      []byte
}

// newReplicaFixture sets up a backend with a replica and expects one grant on
// the primary with RowVersion 0x...0100 and token 8.
func newReplicaFixture(t *testing.T, timeout time.Duration) *replicaFixture {
	t.Helper()
	replicaDB, replicaMock := newMockDB(t)
	var log bytes.Buffer
	f := &replicaFixture{
		log: &log,
		req: backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "att-1", TTL: time.Minute},
		rv:  []byte{0, 0, 0, 0, 0, 0, 1, 0},
	}
	f.b, f.primary = newMockBackend(t,
		WithReplica(replicaDB),
		WithReplicaTimeout(timeout),
		WithReplicaPollInterval(time.Millisecond),
		WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	)
	f.replica = replicaMock
	f.primary.ExpectQuery(f.b.q.acquire).
		WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeInserted), "me", int64(8), time.Now().Add(time.Minute), f.rv, nil, false, nil))
	return f
}

func (f *replicaFixture) expectReplica(rows *sqlmock.Rows) *sqlmock.ExpectedQuery {
	return f.replica.ExpectQuery(f.b.q.replica).WithArgs(sql.Named("name", "job")).WillReturnRows(rows)
}

// expectRelease expects the release of exactly the unconfirmed holding
// (attempt and token, never token 0).
func (f *replicaFixture) expectRelease() *sqlmock.ExpectedQuery {
	return f.primary.ExpectQuery(f.b.q.release).
		WithArgs(sql.Named("name", "job"), sql.Named("owner", "me"), sql.Named("attempt", "att-1"), sql.Named("token", int64(8))).
		WillReturnRows(releaseRows(1))
}

func TestReplicaConfirmsByteEqualRowVersion(t *testing.T) {
	f := newReplicaFixture(t, time.Minute)
	f.expectReplica(sqlmock.NewRows(replicaColumns))                                                         // not replayed yet
	f.expectReplica(sqlmock.NewRows(replicaColumns).AddRow([]byte{0, 0, 0, 0, 0, 0, 0, 9}, "old", int64(7))) // older write
	f.expectReplica(sqlmock.NewRows(replicaColumns).AddRow([]byte{0, 0, 0, 0, 0, 0, 1, 0}, "me", int64(8)))
	g, err := f.b.Acquire(context.Background(), f.req)
	if err != nil || !g.Acquired || g.Token != 8 {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
}

// TestReplicaConfirmsLaterWriteOfSameHolding: a later RowVersion of the same
// owner and token means the grant's write was replayed (logs replay in
// order).
func TestReplicaConfirmsLaterWriteOfSameHolding(t *testing.T) {
	f := newReplicaFixture(t, time.Minute)
	f.expectReplica(sqlmock.NewRows(replicaColumns).AddRow([]byte{0, 0, 0, 0, 0, 0, 1, 5}, "me", int64(8)))
	g, err := f.b.Acquire(context.Background(), f.req)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
}

// TestReplicaNotConfirmedReleasesAndReportsNotAcquired: the replica shows
// only a later write of another holding until the timeout: the grant is
// released on the primary and reported as not acquired, with a warning.
func TestReplicaNotConfirmedReleasesAndReportsNotAcquired(t *testing.T) {
	f := newReplicaFixture(t, 20*time.Millisecond)
	f.expectReplica(sqlmock.NewRows(replicaColumns).AddRow([]byte{0, 0, 0, 0, 0, 0, 2, 0}, "someone else", int64(9)))
	f.expectRelease()
	g, err := f.b.Acquire(context.Background(), f.req)
	if err != nil || g != (backend.Grant{}) {
		t.Fatalf("Acquire = %+v, %v; want not acquired, nil", g, err)
	}
	if !strings.Contains(f.log.String(), "not confirmed on the replica in time") {
		t.Errorf("no warning logged:\n%s", f.log)
	}
}

// TestReplicaNotConfirmedAndReleaseFailedIsAFault: the grant was not
// confirmed in time and releasing it failed too: the grant may still stand,
// so Acquire reports a fault wrapping ErrReplicaNotConfirmed and the release
// error, never "not acquired" (which would let the engine forget a holding
// that blocks the name).
func TestReplicaNotConfirmedAndReleaseFailedIsAFault(t *testing.T) {
	f := newReplicaFixture(t, 20*time.Millisecond)
	f.expectReplica(sqlmock.NewRows(replicaColumns)) // never replayed
	releaseErr := errors.New("login failed for user")
	f.expectRelease().WillReturnError(releaseErr)
	g, err := f.b.Acquire(context.Background(), f.req)
	if !errors.Is(err, ErrReplicaNotConfirmed) || !errors.Is(err, releaseErr) || g != (backend.Grant{}) {
		t.Fatalf("Acquire = %+v, %v; want an error wrapping ErrReplicaNotConfirmed and the release error", g, err)
	}
}

// TestReplicaUnreadableAndReleaseFailed: both errors are reported.
func TestReplicaUnreadableAndReleaseFailed(t *testing.T) {
	f := newReplicaFixture(t, 20*time.Millisecond)
	f.replica.ExpectQuery(f.b.q.replica).WillReturnError(errors.New("replica down"))
	releaseErr := errors.New("login failed for user")
	f.expectRelease().WillReturnError(releaseErr)
	g, err := f.b.Acquire(context.Background(), f.req)
	if !errors.Is(err, ErrReplicaUnavailable) || !errors.Is(err, releaseErr) || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want ErrReplicaUnavailable and the release error", g, err)
	}
}

// TestReplicaUnreadableIsAFault: a replica that never answers is a fault, not
// a busy lease; the grant is still released.
func TestReplicaUnreadableIsAFault(t *testing.T) {
	f := newReplicaFixture(t, 20*time.Millisecond)
	f.replica.ExpectQuery(f.b.q.replica).WillReturnError(errors.New("replica down"))
	// Later polls fail too: the mock has no more expectations.
	f.expectRelease()
	g, err := f.b.Acquire(context.Background(), f.req)
	if !errors.Is(err, ErrReplicaUnavailable) || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want ErrReplicaUnavailable", g, err)
	}
}

// TestReplicaContextEndsReleases: ctx ends while confirming: the grant is
// released anyway (with a fresh context) and ctx's error returned.
func TestReplicaContextEndsReleases(t *testing.T) {
	f := newReplicaFixture(t, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	f.replica.ExpectQuery(f.b.q.replica).WithArgs(cancelOnMatch{cancel}).WillReturnRows(sqlmock.NewRows(replicaColumns))
	f.expectRelease()
	g, err := f.b.Acquire(ctx, f.req)
	if !errors.Is(err, context.Canceled) || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want context.Canceled", g, err)
	}
}

// TestReplicaNotAskedWhenBusy: only grants are confirmed.
func TestReplicaNotAskedWhenBusy(t *testing.T) {
	replicaDB, _ := newMockDB(t)
	b, mock := newMockBackend(t, WithReplica(replicaDB))
	mock.ExpectQuery(b.q.acquire).
		WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeBusy), "other", int64(3), time.Now(), nil, int64(500), false, nil))
	g, err := b.Acquire(context.Background(), backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "a", TTL: time.Second})
	if err != nil || g.Acquired || g.Holder != "other" {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
}

// Options cannot fail: New reports a value it cannot use, naming the option.
func TestNewRefusesBadOptions(t *testing.T) {
	db, _ := newMockDB(t)
	for want, opt := range map[string]Option{
		"WithReplica(nil)":              WithReplica(nil),
		"WithReplicaTimeout(0s)":        WithReplicaTimeout(0),
		"WithReplicaPollInterval(-1ns)": WithReplicaPollInterval(-1),
		"WithSweep(0s, -1)":             WithSweep(0, -1),
		"WithSweep(-1s, 100)":           WithSweep(-time.Second, 100),
		"WithSweep(0s, 4001)":           WithSweep(0, MaxSweepBatch+1),
		"WithRetry(0, 1ms, 1s)":         WithRetry(0, time.Millisecond, time.Second),
		"WithRetry(2, 1s, 1ms)":         WithRetry(2, time.Second, time.Millisecond),
		"WithRetry(2, 0s, 1ms)":         WithRetry(2, 0, time.Millisecond),
	} {
		_, err := New(db, opt)
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%s) = %v, want ErrInvalidOption naming it", want, err)
		}
	}
	for _, opt := range []Option{WithSweep(time.Minute, 0), WithSweep(0, MaxSweepBatch), WithRetry(1, time.Millisecond, time.Millisecond), WithLogger(nil)} {
		if _, err := New(db, opt); err != nil {
			t.Errorf("New with a usable option: %v", err)
		}
	}
}

// TestSweepBatchBelowLockEscalation: a sweep batch that would make one DELETE
// take 5,000 row locks (where SQL Server escalates to a table lock) is
// refused with an error that says why; 4,000 is accepted.
func TestSweepBatchBelowLockEscalation(t *testing.T) {
	db, _ := newMockDB(t)
	for _, batch := range []int{5_000, 100_000} {
		_, err := New(db, WithSweep(0, batch))
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "table lock") {
			t.Errorf("New(WithSweep(0, %d)) = %v, want ErrInvalidOption naming the lock escalation", batch, err)
		}
	}
	if _, err := New(db, WithSweep(0, 4_000)); err != nil {
		t.Errorf("New(WithSweep(0, 4000)) = %v", err)
	}
}
