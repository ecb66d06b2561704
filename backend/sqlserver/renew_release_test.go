package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/leasehold/leasehold/backend"
)

func TestRenew(t *testing.T) {
	req := backend.RenewRequest{Key: "job", Owner: "me", Attempt: "att-1", Token: 77, TTL: 2500 * time.Microsecond}
	args := []driver.Value{sql.Named("name", "job"), sql.Named("owner", "me"), sql.Named("attempt", "att-1"), sql.Named("token", int64(77)), sql.Named("ttlUs", int64(2500))}
	expires := time.Date(2026, 3, 1, 12, 0, 0, 100, plus2)

	t.Run("held", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.renew).WithArgs(args...).
			WillReturnRows(sqlmock.NewRows([]string{"FencingToken", "ExpiresAtUtc"}).AddRow(int64(77), expires))
		g, err := b.Renew(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if want := (backend.Grant{Acquired: true, Token: 77, ExpiresAt: expires.UTC()}); g != want {
			t.Errorf("grant = %+v, want %+v", g, want)
		}
	})

	t.Run("not held", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.renew).WithArgs(args...).WillReturnRows(sqlmock.NewRows([]string{"FencingToken", "ExpiresAtUtc"}))
		if _, err := b.Renew(context.Background(), req); !errors.Is(err, backend.ErrNotHeld) {
			t.Fatalf("err = %v, want ErrNotHeld", err)
		}
	})

	t.Run("fault is not ErrNotHeld", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.renew).WillReturnError(errors.New("network down"))
		_, err := b.Renew(context.Background(), req)
		if err == nil || errors.Is(err, backend.ErrNotHeld) {
			t.Fatalf("err = %v, want a fault", err)
		}
	})

	t.Run("token never issued", func(t *testing.T) {
		b, _ := newMockBackend(t)
		r := req
		r.Token = math.MaxInt64 + 1
		if _, err := b.Renew(context.Background(), r); !errors.Is(err, backend.ErrNotHeld) {
			t.Fatalf("err = %v, want ErrNotHeld without a query", err)
		}
	})

	t.Run("wrong token in answer", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.renew).
			WillReturnRows(sqlmock.NewRows([]string{"FencingToken", "ExpiresAtUtc"}).AddRow(int64(78), expires))
		if _, err := b.Renew(context.Background(), req); err == nil || errors.Is(err, backend.ErrNotHeld) {
			t.Fatalf("err = %v, want a fault", err)
		}
	})
}

// releaseColumns are the columns of the release batch's result: whether a
// holding matched, and the hand-off it made (NULLs: none).
var releaseColumns = []string{"Released", "HandedOwner", "HandedAttempt", "HandedToken", "HandedPoll"}

// releaseRows is the release batch's answer without a hand-off.
func releaseRows(released int64) *sqlmock.Rows {
	return sqlmock.NewRows(releaseColumns).AddRow(released, nil, nil, nil, nil)
}

func TestRelease(t *testing.T) {
	for _, token := range []uint64{0, 12} {
		b, mock := newMockBackend(t)
		// Token 0 is sent as 0 and matches any token of this attempt's
		// holding, and only that (see TestReleaseSQLFilters); nothing
		// deleted is still success.
		mock.ExpectQuery(b.q.release).
			WithArgs(sql.Named("name", "job"), sql.Named("owner", "me"), sql.Named("attempt", "att-1"), sql.Named("token", int64(token))).
			WillReturnRows(releaseRows(0))
		if err := b.Release(context.Background(), backend.ReleaseRequest{Key: "job", Owner: "me", Attempt: "att-1", Token: token}); err != nil {
			t.Errorf("Release(token %d) = %v", token, err)
		}
	}

	b, mock := newMockBackend(t)
	mock.ExpectQuery(b.q.release).WillReturnError(errors.New("connection refused"))
	if err := b.Release(context.Background(), backend.ReleaseRequest{Key: "job", Owner: "me", Attempt: "att-1", Token: 3}); err == nil {
		t.Error("a failed release returned nil")
	}

	// A token never issued matches no holding, but the attempt's queue
	// entry must still go: the batch runs with token -1, which no row has
	// (CK_table_FencingToken) and which is not the wildcard 0.
	b, mock = newMockBackend(t)
	mock.ExpectQuery(b.q.release).
		WithArgs(sql.Named("name", "job"), sql.Named("owner", "me"), sql.Named("attempt", "att-1"), sql.Named("token", int64(-1))).
		WillReturnRows(releaseRows(0))
	if err := b.Release(context.Background(), backend.ReleaseRequest{Key: "job", Owner: "me", Attempt: "att-1", Token: math.MaxUint64}); err != nil {
		t.Errorf("release of a never issued token = %v", err)
	}
}

func TestInfoAndClose(t *testing.T) {
	b, _ := newMockBackend(t)
	if got := b.Info(); got != (backend.Info{Name: "sqlserver", Queue: true, MaxLimit: backend.MaxLimit}) {
		t.Errorf("Info = %+v", got)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}
