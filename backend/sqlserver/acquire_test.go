package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
)

var acquireColumns = []string{"Outcome", "Holder", "FencingToken", "ExpiresAtUtc", "RowVer", "RemainingUs", "Queued", "HeldLimit"}

// plus2 is a DATETIMEOFFSET as go-mssqldb returns it: a time in the offset
// the server stored.
var plus2 = time.FixedZone("+02:00", 2*60*60)

// acquireArgsFor is the expected binding of r, written out rather than
// built with acquireArgs: a request that queues nothing sends @entryTtlUs,
// @pickupUs and @poll 0 (TestAcquireQueueBinding checks the values
// literally).
func acquireArgsFor(r backend.AcquireRequest, sweep int64) []driver.Value {
	var entryTTL, pickup int64
	if r.Wait && r.Queue.EntryTTL > 0 {
		entryTTL, pickup = ttlMicros(r.Queue.EntryTTL), ttlMicros(r.Queue.Pickup)
	}
	return []driver.Value{
		sql.Named("name", r.Key),
		sql.Named("owner", r.Owner),
		sql.Named("attempt", r.Attempt),
		sql.Named("ttlUs", ttlMicros(r.TTL)),
		sql.Named("metadata", r.Metadata),
		sql.Named("entryTtlUs", entryTTL),
		sql.Named("pickupUs", pickup),
		sql.Named("poll", int64(r.Queue.Poll)),
		sql.Named("sweep", sweep),
	}
}

func TestAcquireOutcomes(t *testing.T) {
	expires := time.Date(2026, 3, 1, 12, 0, 30, 123456700, plus2)
	rv := []byte{0, 0, 0, 0, 0, 0, 0x07, 0xd1}
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "att-1", TTL: 30 * time.Second, Metadata: "m"}
	cases := []struct {
		name string
		row  []driver.Value
		want backend.Grant
	}{
		{"inserted", []driver.Value{int64(outcomeInserted), "me", int64(41), expires, rv, nil, false, nil},
			backend.Grant{Acquired: true, Token: 41, ExpiresAt: expires.UTC()}},
		{"taken over", []driver.Value{int64(outcomeTakeover), "me", int64(42), expires, rv, nil, false, nil},
			backend.Grant{Acquired: true, Token: 42, ExpiresAt: expires.UTC()}},
		{"refreshed", []driver.Value{int64(outcomeRefresh), "me", int64(40), expires, rv, nil, false, nil},
			backend.Grant{Acquired: true, Token: 40, ExpiresAt: expires.UTC()}},
		// The holder's remaining time is the server's measure, whatever the
		// local clock says about HolderExpiresAt (here years in the past).
		{"busy", []driver.Value{int64(outcomeBusy), "other", int64(39), expires, nil, int64(29_500_001), false, nil},
			backend.Grant{Holder: "other", HolderToken: 39, HolderExpiresAt: expires.UTC(), HolderExpiresIn: 29_500_001 * time.Microsecond}},
		// The same owner's other holding (another attempt) is a refusal too:
		// the batch reports it as busy, and so does the backend.
		{"busy, same owner", []driver.Value{int64(outcomeBusy), "me", int64(38), expires, nil, int64(1), false, nil},
			backend.Grant{Holder: "me", HolderToken: 38, HolderExpiresAt: expires.UTC(), HolderExpiresIn: time.Microsecond}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, mock := newMockBackend(t)
			mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).
				WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(c.row...))
			g, err := b.Acquire(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if g != c.want { // == also compares the location: both must be UTC
				t.Errorf("grant = %+v, want %+v", g, c.want)
			}
			if !g.ExpiresAt.Equal(c.want.ExpiresAt) || !g.HolderExpiresAt.Equal(c.want.HolderExpiresAt) {
				t.Errorf("expiry changed instant: %+v", g)
			}
		})
	}
}

// TestAcquireRejectsMalformedResults checks that an answer that does not make
// sense is a fault, never a grant and never "not acquired".
func TestAcquireRejectsMalformedResults(t *testing.T) {
	expires := time.Now()
	rv := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "att-1", TTL: time.Second}
	rows := map[string]*sqlmock.Rows{
		"no row":               sqlmock.NewRows(acquireColumns),
		"token 0":              sqlmock.NewRows(acquireColumns).AddRow(int64(1), "me", int64(0), expires, rv, nil, false, nil),
		"negative token":       sqlmock.NewRows(acquireColumns).AddRow(int64(1), "me", int64(-5), expires, rv, nil, false, nil),
		"other holder":         sqlmock.NewRows(acquireColumns).AddRow(int64(3), "you", int64(5), expires, rv, nil, false, nil),
		"short rowversion":     sqlmock.NewRows(acquireColumns).AddRow(int64(1), "me", int64(5), expires, []byte{1}, nil, false, nil),
		"no expiry":            sqlmock.NewRows(acquireColumns).AddRow(int64(2), "me", int64(5), nil, rv, nil, false, nil),
		"busy, no holder":      sqlmock.NewRows(acquireColumns).AddRow(int64(0), nil, int64(5), expires, nil, int64(10), false, nil),
		"busy, no token":       sqlmock.NewRows(acquireColumns).AddRow(int64(0), "you", nil, expires, nil, int64(10), false, nil),
		"busy, no remaining":   sqlmock.NewRows(acquireColumns).AddRow(int64(0), "you", int64(5), expires, nil, nil, false, nil),
		"busy, expired holder": sqlmock.NewRows(acquireColumns).AddRow(int64(0), "you", int64(5), expires, nil, int64(0), false, nil),
		"unknown outcome":      sqlmock.NewRows(acquireColumns).AddRow(int64(9), "me", int64(5), expires, rv, nil, false, nil),
		// A grant with an entry left: the batch removes a granted
		// attempt's entry, so this is not a grant it can make.
		"grant, still queued": sqlmock.NewRows(acquireColumns).AddRow(int64(1), "me", int64(5), expires, rv, nil, true, nil),
		// The head's turn has no holder and no token, and time left.
		"turn with a holder":   sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeTurn), "you", nil, expires, nil, int64(10), false, nil),
		"turn with a token":    sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeTurn), nil, int64(5), expires, nil, int64(10), false, nil),
		"turn without its end": sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeTurn), nil, nil, nil, nil, int64(10), false, nil),
		"turn over":            sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeTurn), nil, nil, expires, nil, int64(0), true, nil),
		"no queued flag":       sqlmock.NewRows(acquireColumns).AddRow(int64(0), "you", int64(5), expires, nil, int64(10), nil, nil),
		"error after row":      sqlmock.NewRows(acquireColumns).AddRow(int64(1), "me", int64(5), expires, rv, nil, false, nil).RowError(0, errors.New("boom")),
	}
	for name, r := range rows {
		t.Run(name, func(t *testing.T) {
			b, mock := newMockBackend(t)
			mock.ExpectQuery(b.q.acquire).WillReturnRows(r)
			g, err := b.Acquire(context.Background(), req)
			if err == nil || g != (backend.Grant{}) {
				t.Fatalf("Acquire = %+v, %v; want a fault", g, err)
			}
		})
	}
}

func TestAcquireParameterTypes(t *testing.T) {
	b, _ := newMockBackend(t, WithSweep(0, 7))
	req := backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: backend.MaxTTL, Metadata: "x"}
	want := map[string]any{"name": "k", "owner": "o", "attempt": "a", "ttlUs": int64(backend.MaxTTL / time.Microsecond), "metadata": "x",
		"entryTtlUs": int64(0), "pickupUs": int64(0), "poll": int64(0), "sweep": int64(7)}
	for _, a := range b.acquireArgs(req) {
		na := a.(sql.NamedArg)
		// go-mssqldb sends string as NVARCHAR and int64 as BIGINT; any other
		// Go type (int, uint64, time.Duration) would be converted or rejected.
		if na.Value != want[na.Name] {
			t.Errorf("@%s = %#v (%T), want %#v (%T)", na.Name, na.Value, na.Value, want[na.Name], want[na.Name])
		}
		delete(want, na.Name)
	}
	if len(want) != 0 {
		t.Errorf("parameters not sent: %v", want)
	}
}

// TestTTLFitsDateadd checks the two DATEADD steps stay within INT for every
// valid TTL, and that rounding never shortens a TTL.
func TestTTLFitsDateadd(t *testing.T) {
	for _, ttl := range []time.Duration{backend.MinTTL, time.Millisecond + 1, 1500 * time.Nanosecond, 36 * time.Minute, 24 * time.Hour, backend.MaxTTL} {
		us := ttlMicros(ttl)
		if time.Duration(us)*time.Microsecond < ttl || time.Duration(us-1)*time.Microsecond >= ttl {
			t.Errorf("ttlMicros(%v) = %d, not the ceiling", ttl, us)
		}
		if secs, rest := us/1_000_000, us%1_000_000; secs > math.MaxInt32 || rest > math.MaxInt32 {
			t.Errorf("TTL %v overflows DATEADD's INT: %d s + %d µs", ttl, secs, rest)
		}
	}
	if us := ttlMicros(backend.MaxTTL); us <= math.MaxInt32 {
		t.Fatalf("test is vacuous: MaxTTL in µs (%d) fits an INT", us)
	}
}

// TestValidateBeforeStore sends invalid requests: each must fail with
// ErrInvalidRequest before any SQL runs (the mock has no expectations, so any
// query would fail differently).
func TestValidateBeforeStore(t *testing.T) {
	b, _ := newMockBackend(t)
	ctx := context.Background()
	long := strings.Repeat("é", backend.MaxKeyRunes+1)
	acquires := []backend.AcquireRequest{
		{Key: "", Owner: "o", Attempt: "a", TTL: time.Second},
		{Key: "k", Owner: " ", Attempt: "a", TTL: time.Second},
		{Key: "k\x00", Owner: "o", Attempt: "a", TTL: time.Second},
		{Key: long, Owner: "o", Attempt: "a", TTL: time.Second},
		{Key: "k", Owner: "o", Attempt: "a", TTL: 0},
		{Key: "k", Owner: "o", Attempt: "a", TTL: backend.MaxTTL + 1},
		{Key: "k", Owner: "o", Attempt: "a", TTL: time.Second, Metadata: strings.Repeat("x", backend.MaxMetadataBytes+1)},
		{Key: "k", Owner: "o", TTL: time.Second},                                                          // no attempt
		{Key: "k", Owner: "o", Attempt: "a b", TTL: time.Second},                                          // not printable without spaces
		{Key: "k", Owner: "o", Attempt: strings.Repeat("a", backend.MaxAttemptBytes+1), TTL: time.Second}, // too long for AttemptId
	}
	for _, r := range acquires {
		if _, err := b.Acquire(ctx, r); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("Acquire(%+.40v) = %v", r, err)
		}
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "o", Attempt: "a", Token: 0, TTL: time.Second}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Renew with token 0 = %v", err)
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "k", Owner: "o", Token: 1, TTL: time.Second}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Renew without attempt = %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "\xff", Attempt: "a"}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Release with invalid owner = %v", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "o"}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("Release without attempt = %v", err)
	}
}

// TestHostileKeyIsAParameter: a name that looks like SQL travels as a
// parameter value and is never part of the SQL text.
func TestHostileKeyIsAParameter(t *testing.T) {
	b, mock := newMockBackend(t)
	req := backend.AcquireRequest{Key: "x'; DROP TABLE lease.Leases; --", Owner: "o]'\"", Attempt: "a']--", TTL: time.Second, Metadata: "{*?[]}"}
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).
		WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(1), req.Owner, int64(1), time.Now(), make([]byte, 8), nil, false, nil))
	mock.ExpectQuery(b.q.release).WithArgs(sql.Named("name", req.Key), sql.Named("owner", req.Owner), sql.Named("attempt", req.Attempt), sql.Named("token", int64(1))).
		WillReturnRows(releaseRows(1))
	g, err := b.Acquire(context.Background(), req)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if err := b.Release(context.Background(), backend.ReleaseRequest{Key: req.Key, Owner: req.Owner, Attempt: req.Attempt, Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.q.acquire, "DROP") || strings.Contains(b.q.release, "DROP") {
		t.Error("the key leaked into the SQL text")
	}
}

// TestAcquireDelayedDurabilityForced: the acquire batch's guard raises its
// error on a database with DELAYED_DURABILITY = FORCED; Acquire reports
// ErrDelayedDurability at once (not retried, not "not acquired").
func TestAcquireDelayedDurabilityForced(t *testing.T) {
	b, mock := newMockBackend(t)
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "a", TTL: time.Second}
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).
		WillReturnError(mssql.Error{Number: errDelayedDurabilityNumber, Class: 16, Message: "leasehold: the database has DELAYED_DURABILITY = FORCED"})
	g, err := b.Acquire(context.Background(), req)
	if !errors.Is(err, ErrDelayedDurability) || g != (backend.Grant{}) {
		t.Fatalf("Acquire = %+v, %v; want ErrDelayedDurability", g, err)
	}
}

// WithSweep(every, batch): a sweep of batch rows at most once per every (the
// other acquires send @sweep 0), in every acquire with every 0, never with
// batch 0 (and then the batch has no DELETE).
func TestAcquireSweepEvery(t *testing.T) {
	req := backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: time.Second}
	sweepArg := func(b *Backend) int64 {
		for _, a := range b.acquireArgs(req) {
			if na := a.(sql.NamedArg); na.Name == "sweep" {
				return na.Value.(int64)
			}
		}
		t.Fatal("no @sweep")
		return 0
	}
	hourly, _ := newMockBackend(t, WithSweep(time.Hour, 7))
	if got := []int64{sweepArg(hourly), sweepArg(hourly), sweepArg(hourly)}; !slices.Equal(got, []int64{7, 0, 0}) {
		t.Errorf("hourly sweep: @sweep %v, want 7 then 0s", got)
	}
	always, _ := newMockBackend(t, WithSweep(0, 7))
	if got := []int64{sweepArg(always), sweepArg(always)}; !slices.Equal(got, []int64{7, 7}) {
		t.Errorf("sweep in every acquire: @sweep %v", got)
	}
	never, _ := newMockBackend(t, WithSweep(time.Second, 0))
	if got := sweepArg(never); got != 0 || strings.Contains(never.q.acquire, "DELETE TOP") {
		t.Errorf("sweep off: @sweep %d, batch has DELETE TOP: %v", got, strings.Contains(never.q.acquire, "DELETE TOP"))
	}
}

// A duplicate key from the acquire's INSERT is another session's win: the
// batch is read again and names the winner; it is never a fault.
func TestAcquireDuplicateKeyIsARefusal(t *testing.T) {
	expires := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "att-1", TTL: 30 * time.Second}
	dup := mssql.Error{Number: 2627, Message: "Violation of PRIMARY KEY constraint"}

	t.Run("read again", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).WillReturnError(dup)
		mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).
			WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeBusy), "winner", int64(7), expires, nil, int64(1_000_000), false, nil))
		g, err := b.Acquire(context.Background(), req)
		if err != nil || g.Acquired || g.Holder != "winner" || g.HolderToken != 7 {
			t.Fatalf("Acquire = %+v, %v; want refused, naming the winner", g, err)
		}
	})
	t.Run("keeps colliding", func(t *testing.T) {
		b, mock := newMockBackend(t)
		for range duplicateRereads {
			mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).WillReturnError(dup)
		}
		g, err := b.Acquire(context.Background(), req)
		if err != nil || g.Acquired {
			t.Fatalf("Acquire = %+v, %v; want refused without error", g, err)
		}
	})
}
