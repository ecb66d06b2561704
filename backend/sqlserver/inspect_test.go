package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
)

var holdingColumns = []string{"OwnerInstanceId", "FencingToken", "ExpiresAtUtc", "RemainingUs", "Metadata", "HolderLimit"}

func TestInspect(t *testing.T) {
	expires := time.Date(2026, 3, 1, 12, 0, 30, 100, plus2)
	ctx := context.Background()

	t.Run("held", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.inspect).WithArgs(sql.Named("name", "job")).
			WillReturnRows(sqlmock.NewRows(holdingColumns).AddRow("o1", int64(7), expires, int64(59_000_000), "md", int64(1)))
		h, held, err := b.Inspect(ctx, "job")
		want := backend.Holder{Key: "job", Owner: "o1", Token: 7, ExpiresAt: expires.UTC(), ExpiresIn: 59 * time.Second, Metadata: "md", Limit: 1}
		if err != nil || !held || h != want {
			t.Fatalf("Inspect = %+v, %v, %v; want %+v", h, held, err, want)
		}
	})
	t.Run("free or expired", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.inspect).WillReturnRows(sqlmock.NewRows(holdingColumns))
		if h, held, err := b.Inspect(ctx, "job"); err != nil || held || h != (backend.Holder{}) {
			t.Fatalf("Inspect = %+v, %v, %v; want not held", h, held, err)
		}
	})
	t.Run("retried after a deadlock", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.inspect).WillReturnError(deadlockErr)
		mock.ExpectQuery(b.q.inspect).WillReturnRows(sqlmock.NewRows(holdingColumns).AddRow("o1", int64(7), expires, int64(1), "", int64(1)))
		if _, held, err := b.Inspect(ctx, "job"); err != nil || !held {
			t.Fatalf("Inspect = %v, %v", held, err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for name, rows := range map[string]*sqlmock.Rows{
			"token 0":      sqlmock.NewRows(holdingColumns).AddRow("o1", int64(0), expires, int64(1), "", int64(1)),
			"expired":      sqlmock.NewRows(holdingColumns).AddRow("o1", int64(7), expires, int64(0), "", int64(1)),
			"two holdings": sqlmock.NewRows(holdingColumns).AddRow("o1", int64(7), expires, int64(1), "", int64(1)).AddRow("o2", int64(8), expires, int64(1), "", int64(1)),
		} {
			b, mock := newMockBackend(t)
			mock.ExpectQuery(b.q.inspect).WillReturnRows(rows)
			if _, held, err := b.Inspect(ctx, "job"); err == nil || held {
				t.Errorf("%s: Inspect = %v, %v; want a fault", name, held, err)
			}
		}
	})
	t.Run("invalid key touches nothing", func(t *testing.T) {
		b, _ := newMockBackend(t)
		for _, key := range []string{"", " ", "a\x00", "\xff", strings.Repeat("k", backend.MaxKeyRunes+1)} {
			if _, _, err := b.Inspect(ctx, key); !errors.Is(err, backend.ErrInvalidRequest) {
				t.Errorf("Inspect(%q) = %v, want ErrInvalidRequest", key, err)
			}
		}
	})
}

var listColumns = append([]string{"LeaseName"}, holdingColumns...)

func TestList(t *testing.T) {
	expires := time.Now().Add(time.Minute)
	ctx := context.Background()

	t.Run("all, in order, until fn stops", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.list).WithArgs(sql.Named("prefix", "jobs/")).
			WillReturnRows(sqlmock.NewRows(listColumns).
				AddRow("jobs/a", "o1", int64(1), expires, int64(60_000_000), "", int64(1)).
				AddRow("jobs/b", "o2", int64(2), expires, int64(60_000_000), "m", int64(1)).
				AddRow("jobs/c", "o3", int64(3), expires, int64(60_000_000), "", int64(1)))
		var got []string
		err := b.List(ctx, "jobs/", func(h backend.Holder) bool {
			got = append(got, h.Key+"="+h.Owner)
			return len(got) < 2
		})
		if err != nil || strings.Join(got, ",") != "jobs/a=o1,jobs/b=o2" {
			t.Fatalf("List = %v, %v; want two holdings, then stopped", got, err)
		}
	})
	t.Run("a key without the prefix is a fault", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.list).WillReturnRows(sqlmock.NewRows(listColumns).AddRow("other", "o1", int64(1), expires, int64(1), "", int64(1)))
		if err := b.List(ctx, "jobs/", func(backend.Holder) bool { t.Error("fn called"); return true }); err == nil {
			t.Fatal("want a fault")
		}
	})
	t.Run("bad prefixes", func(t *testing.T) {
		b, _ := newMockBackend(t)
		for _, p := range []string{"\xff", "a\x00"} {
			if err := b.List(ctx, p, func(backend.Holder) bool { return true }); !errors.Is(err, backend.ErrInvalidRequest) {
				t.Errorf("List(%q) = %v, want ErrInvalidRequest", p, err)
			}
		}
		// Longer than any key: nothing to list, and no query.
		if err := b.List(ctx, strings.Repeat("😀", backend.MaxKeyRunes+1), func(backend.Holder) bool { t.Error("fn called"); return true }); err != nil {
			t.Error(err)
		}
	})
}

func TestRevoke(t *testing.T) {
	expires := time.Now().Add(time.Minute)
	ctx := context.Background()
	for _, token := range []uint64{0, 7} {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.revoke).WithArgs(sql.Named("name", "job"), sql.Named("token", int64(token))).
			WillReturnRows(sqlmock.NewRows(holdingColumns).AddRow("o1", int64(7), expires, int64(1_000_000), "", int64(1)))
		h, removed, err := b.Revoke(ctx, "job", token)
		if err != nil || !removed || h.Owner != "o1" || h.Token != 7 || h.Key != "job" {
			t.Errorf("Revoke(token %d) = %+v, %v, %v", token, h, removed, err)
		}
	}

	b, mock := newMockBackend(t)
	mock.ExpectQuery(b.q.revoke).WillReturnRows(sqlmock.NewRows(holdingColumns))
	if _, removed, err := b.Revoke(ctx, "job", 8); err != nil || removed {
		t.Errorf("Revoke of another token = %v, %v; want nothing removed", removed, err)
	}

	// A deadlock victim's revoke was rolled back whole: it runs again.
	b, mock = newMockBackend(t)
	mock.ExpectQuery(b.q.revoke).WillReturnError(deadlockErr)
	mock.ExpectQuery(b.q.revoke).WithArgs(sql.Named("name", "job"), sql.Named("token", int64(0))).
		WillReturnRows(sqlmock.NewRows(holdingColumns).AddRow("o1", int64(7), expires, int64(1_000_000), "", int64(1)))
	if h, removed, err := b.Revoke(ctx, "job", 0); err != nil || !removed || h.Token != 7 {
		t.Errorf("Revoke after a deadlock = %+v, %v, %v; want it run again and removed", h, removed, err)
	}

	// Never retried after another transient error, whose batch may have
	// committed: a second run could misreport or remove a newer holding.
	for _, transient := range []error{mssql.Error{Number: 40613}, mssql.StreamError{InnerError: io.ErrUnexpectedEOF}} {
		b, mock = newMockBackend(t)
		mock.ExpectQuery(b.q.revoke).WillReturnError(transient)
		if _, removed, err := b.Revoke(ctx, "job", 0); err == nil || removed {
			t.Errorf("Revoke after %v = %v, %v; want the error", transient, removed, err)
		}
	}

	b, _ = newMockBackend(t)
	if _, _, err := b.Revoke(ctx, "", 1); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Revoke(\"\") = %v", err)
	}
	if _, removed, err := b.Revoke(ctx, "job", 1<<63); err != nil || removed {
		t.Errorf("Revoke of a never issued token = %v, %v", removed, err)
	}
}

// TestInspectSQL: every operator query reads the clock once and counts only
// live rows; List compares the prefix byte for byte.
func TestInspectSQL(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true)
	for name, text := range map[string]string{"inspect": q.inspect, "list": q.list, "revoke": q.revoke} {
		if strings.Count(text, "SYSDATETIMEOFFSET()") != 1 {
			t.Errorf("%s: want one clock read", name)
		}
		indexOf(t, text, "ExpiresAtUtc > @now")
		indexOf(t, text, remainingUs)
	}
	indexOf(t, q.inspect, "WHERE "+keyMatch)
	indexOf(t, q.revoke, "WHERE "+keyMatch)
	indexOf(t, q.revoke, "(@token = 0 OR FencingToken = @token)")
	// By bytes: LEN and LEFT would count characters by two different
	// collations (a supplementary character is one under _SC and _UTF8
	// collations, two under the column's BIN2).
	indexOf(t, q.list, "WHERE LeaseNameBytes >= DATALENGTH(@prefix)\n  AND SUBSTRING(CAST(LeaseName AS VARBINARY(800)), 1, DATALENGTH(@prefix)) = CAST(@prefix AS VARBINARY(MAX))")
	for _, chars := range []string{"LEN(", "LEFT("} {
		if strings.Contains(q.list, chars) {
			t.Errorf("list measures the prefix in characters (%s)", chars)
		}
	}
	indexOf(t, q.list, "ORDER BY LeaseName, LeaseNameBytes, FencingToken;")
	for name, text := range map[string]string{"inspect": q.inspect, "list": q.list, "revoke": q.revoke} {
		checkWellFormed(t, name, text, map[string]bool{"@name": true, "@prefix": true, "@token": true})
	}
}
