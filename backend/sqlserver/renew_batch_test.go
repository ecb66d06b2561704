package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/leasehold/leasehold/backend"
)

var batchColumns = []string{"LeaseName", "OwnerInstanceId", "AttemptId", "FencingToken", "ExpiresAtUtc"}

func TestRenewBatchSQL(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	q := renewBatchSQL(n, []int{0, 3}, []int64{1_000_000, 2_500_000})
	indexOf(t, q, "INSERT INTO @req (Idx, LeaseName, OwnerInstanceId, AttemptId, FencingToken, TtlUs) VALUES\n    (0, @n0, @o0, @a0, @t0, @u0),\n    (3, @n3, @o3, @a3, @t3, @u3);")
	indexOf(t, q, "AttemptId       NVARCHAR(64)  COLLATE Latin1_General_100_BIN2 NOT NULL,")
	indexOf(t, q, "LeaseName       NVARCHAR(400) COLLATE Latin1_General_100_BIN2 NOT NULL,")
	indexOf(t, q, "OwnerInstanceId NVARCHAR(400) COLLATE Latin1_General_100_BIN2 NOT NULL,")
	join := q[indexOf(t, q, "INNER JOIN @req AS r"):]
	for _, want := range []string{
		"l.LeaseName = r.LeaseName AND l.LeaseNameBytes = DATALENGTH(r.LeaseName)",
		"l.OwnerInstanceId = r.OwnerInstanceId AND DATALENGTH(l.OwnerInstanceId) = DATALENGTH(r.OwnerInstanceId)",
		"l.AttemptId = r.AttemptId AND DATALENGTH(l.AttemptId) = DATALENGTH(r.AttemptId)",
		"l.FencingToken = r.FencingToken",
		"AND r.TtlUs = 1000000\nWHERE l.ExpiresAtUtc > @now;",
	} {
		indexOf(t, join, want)
	}
	// One UPDATE per TTL, its expiry from that TTL: no SET reads the
	// request table (Babelfish refuses that beside an OUTPUT clause).
	indexOf(t, q, "ExpiresAtUtc = DATEADD(MICROSECOND, CAST(1000000 % 1000000 AS INT), DATEADD(SECOND, CAST(1000000 / 1000000 AS INT), @now))")
	indexOf(t, q, "ExpiresAtUtc = DATEADD(MICROSECOND, CAST(2500000 % 1000000 AS INT), DATEADD(SECOND, CAST(2500000 / 1000000 AS INT), @now))")
	indexOf(t, q, "AND r.TtlUs = 2500000\nWHERE l.ExpiresAtUtc > @now;")
	if strings.Contains(q, "CAST(r.") {
		t.Error("an UPDATE's SET reads the request table")
	}
	// Only the updated table's own columns: some engines (Babelfish for
	// PostgreSQL) refuse an OUTPUT of the joined table's.
	indexOf(t, q, "OUTPUT inserted.LeaseName, inserted.LeaseNameBytes, inserted.OwnerInstanceId, inserted.AttemptId, inserted.FencingToken, inserted.ExpiresAtUtc\nINTO @out")
	if strings.Contains(q, "OUTPUT r.") {
		t.Error("the batch outputs a column of the request table")
	}
	params := map[string]bool{}
	for _, p := range []string{"@n0", "@o0", "@a0", "@t0", "@u0", "@n3", "@o3", "@a3", "@t3", "@u3"} {
		params[p] = true
	}
	checkWellFormed(t, "renew batch", q, params)
}

func batchArgs(i int, r backend.RenewRequest) []driver.Value {
	return []driver.Value{
		sql.Named(fmt.Sprint("n", i), r.Key), sql.Named(fmt.Sprint("o", i), r.Owner), sql.Named(fmt.Sprint("a", i), r.Attempt),
		sql.Named(fmt.Sprint("t", i), int64(r.Token)), sql.Named(fmt.Sprint("u", i), ttlMicros(r.TTL)),
	}
}

func TestRenewBatchResultsPerRequest(t *testing.T) {
	b, mock := newMockBackend(t)
	expires := time.Date(2026, 1, 2, 3, 4, 5, 600, plus2)
	rs := []backend.RenewRequest{
		{Key: "held", Owner: "me", Attempt: "a1", Token: 10, TTL: time.Second},
		{Key: "gone", Owner: "me", Attempt: "a1", Token: 11, TTL: 2 * time.Second},
		{Key: "bad", Owner: "me", Attempt: "a1", Token: 0, TTL: time.Second},               // invalid: never sent
		{Key: "held", Owner: "me", Attempt: "a1", Token: 10, TTL: time.Second},             // duplicate of 0
		{Key: "huge", Owner: "me", Attempt: "a1", Token: math.MaxUint64, TTL: time.Second}, // never issued
		{Key: "held", Owner: "me", Attempt: "a2", Token: 10, TTL: time.Second},             // another attempt: its own request
	}
	args := append(append(batchArgs(0, rs[0]), batchArgs(1, rs[1])...), batchArgs(5, rs[5])...)
	mock.ExpectQuery(renewBatchSQL(b.names, []int{0, 1, 5}, []int64{1_000_000, 2_000_000})).WithArgs(args...).
		WillReturnRows(sqlmock.NewRows(batchColumns).AddRow("held", "me", "a1", int64(10), expires))
	res, err := b.RenewBatch(context.Background(), rs)
	if err != nil {
		t.Fatal(err)
	}
	want := backend.Grant{Acquired: true, Token: 10, ExpiresAt: expires.UTC()}
	if res[0].Err != nil || res[0].Grant != want || res[3].Err != nil || res[3].Grant != want {
		t.Errorf("held results = %+v, %+v; want %+v", res[0], res[3], want)
	}
	if !errors.Is(res[1].Err, backend.ErrNotHeld) || !errors.Is(res[4].Err, backend.ErrNotHeld) || !errors.Is(res[5].Err, backend.ErrNotHeld) {
		t.Errorf("not held results = %v, %v, %v", res[1].Err, res[4].Err, res[5].Err)
	}
	if !errors.Is(res[2].Err, backend.ErrInvalidRequest) {
		t.Errorf("invalid result = %v", res[2].Err)
	}
}

// TestRenewBatchFailsClosed: when the batch cannot be confirmed, no result is
// reported at all.
func TestRenewBatchFailsClosed(t *testing.T) {
	b, mock := newMockBackend(t)
	rs := []backend.RenewRequest{{Key: "a", Owner: "me", Attempt: "a", Token: 1, TTL: time.Second}}
	mock.ExpectQuery(renewBatchSQL(b.names, []int{0}, []int64{1_000_000})).WillReturnError(errors.New("permission denied"))
	if res, err := b.RenewBatch(context.Background(), rs); err == nil || res != nil {
		t.Fatalf("RenewBatch = %v, %v; want nil, error", res, err)
	}

	// A result for a request that was not asked is malformed.
	b, mock = newMockBackend(t)
	mock.ExpectQuery(renewBatchSQL(b.names, []int{0}, []int64{1_000_000})).
		WillReturnRows(sqlmock.NewRows(batchColumns).AddRow("a", "me", "other", int64(1), time.Now()))
	if res, err := b.RenewBatch(context.Background(), rs); err == nil || res != nil {
		t.Fatalf("RenewBatch = %v, %v; want a fault", res, err)
	}
}

func TestRenewBatchRetriesTransientErrors(t *testing.T) {
	b, mock := newMockBackend(t)
	rs := []backend.RenewRequest{{Key: "a", Owner: "me", Attempt: "a", Token: 1, TTL: time.Second}}
	q := renewBatchSQL(b.names, []int{0}, []int64{1_000_000})
	mock.ExpectQuery(q).WillReturnError(deadlockErr)
	mock.ExpectQuery(q).WillReturnRows(sqlmock.NewRows(batchColumns).AddRow("a", "me", "a", int64(1), time.Now()))
	res, err := b.RenewBatch(context.Background(), rs)
	if err != nil || res[0].Err != nil || res[0].Grant.Token != 1 {
		t.Fatalf("RenewBatch = %+v, %v", res, err)
	}
}

// TestRenewBatchChunks: more than 400 renewals go in several round trips,
// each within SQL Server's parameter limit.
func TestRenewBatchChunks(t *testing.T) {
	b, mock := newMockBackend(t)
	rs := make([]backend.RenewRequest, maxBatchRenewals+1)
	first := make([]int, maxBatchRenewals)
	for i := range rs {
		rs[i] = backend.RenewRequest{Key: fmt.Sprint("k", i), Owner: "me", Attempt: "a", Token: uint64(i + 1), TTL: time.Second}
		if i < maxBatchRenewals {
			first[i] = i
		}
	}
	mock.ExpectQuery(renewBatchSQL(b.names, first, []int64{1_000_000})).WillReturnRows(sqlmock.NewRows(batchColumns).AddRow("k5", "me", "a", int64(6), time.Now()))
	mock.ExpectQuery(renewBatchSQL(b.names, []int{maxBatchRenewals}, []int64{1_000_000})).WillReturnRows(sqlmock.NewRows(batchColumns))
	res, err := b.RenewBatch(context.Background(), rs)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, r := range res {
		if r.Err == nil {
			held++
		}
	}
	if held != 1 || res[5].Err != nil {
		t.Errorf("%d held, want only request 5", held)
	}
	if params := 5 * maxBatchRenewals; params >= 2100 || len(regexp.MustCompile(`@n[0-9]+`).FindAllString(renewBatchSQL(b.names, first, []int64{1_000_000}), -1)) != maxBatchRenewals {
		t.Errorf("a chunk sends %d parameters", params)
	}
}

// TestRenewBatchExtendsRecordsByExactName: the records of names that differ
// only by trailing spaces ("s" and "s ") are extended each by its own
// holdings. SQL Server ignores trailing spaces in GROUP BY and in =, so every
// renewed row carries its name's byte length and the records are grouped
// and joined by it too; otherwise one record would take the other's expiry
// and the other would lapse under a live holding.
func TestRenewBatchExtendsRecordsByExactName(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	q := renewBatchSQL(n, []int{0, 1}, []int64{1_000_000})
	if got, want := strings.Count(q, "INTO @out (LeaseName, LeaseNameBytes, "), strings.Count(q, "INTO @out"); got != want || want != 2 {
		t.Errorf("%d of %d OUTPUTs into @out carry LeaseNameBytes", got, want)
	}
	indexOf(t, q, "OUTPUT inserted.LeaseName, inserted.LeaseNameBytes, ")
	indexOf(t, q, "    LeaseNameBytes  INT               NOT NULL,\n    OwnerInstanceId NVARCHAR(400)     NOT NULL,")
	extend := q[indexOf(t, q, "SET ExpiresAtUtc = x.LastExpires"):]
	indexOf(t, extend, "GROUP BY LeaseName, LeaseNameBytes) AS x")
	indexOf(t, extend, "ON m.LeaseName = x.LeaseName AND m.LeaseNameBytes = x.LeaseNameBytes")
	if regexp.MustCompile(`GROUP BY LeaseName\)`).MatchString(q) {
		t.Error("the batch groups renewed rows by LeaseName alone")
	}
}
