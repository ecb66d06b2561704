package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/leasehold/leasehold/backend"
)

// TestAcquireSharedRoundTrip: an acquire with Limit above 1 is one round
// trip of the shared batch, with the exclusive batch's parameters and
// @limit; its answers decode as the exclusive ones, and a refusal for the
// limit carries HeldLimit.
func TestAcquireSharedRoundTrip(t *testing.T) {
	expires := time.Date(2026, 3, 1, 12, 0, 30, 0, plus2)
	rv := []byte{0, 0, 0, 0, 0, 0, 0x07, 0xd1}
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "att-1", TTL: 30 * time.Second, Limit: 3}
	cases := []struct {
		name string
		row  []driver.Value
		want backend.Grant
	}{
		{"granted", []driver.Value{int64(outcomeInserted), "me", int64(41), expires, rv, nil, false, nil},
			backend.Grant{Acquired: true, Token: 41, ExpiresAt: expires.UTC()}},
		{"refreshed", []driver.Value{int64(outcomeRefresh), "me", int64(40), expires, rv, nil, false, nil},
			backend.Grant{Acquired: true, Token: 40, ExpiresAt: expires.UTC()}},
		{"full", []driver.Value{int64(outcomeBusy), "other", int64(39), expires, nil, int64(5_000_000), true, nil},
			backend.Grant{Holder: "other", HolderToken: 39, HolderExpiresAt: expires.UTC(), HolderExpiresIn: 5 * time.Second, Queued: true}},
		{"another limit", []driver.Value{int64(outcomeLimit), "other", int64(39), expires, nil, int64(5_000_000), false, int64(2)},
			backend.Grant{Holder: "other", HolderToken: 39, HolderExpiresAt: expires.UTC(), HolderExpiresIn: 5 * time.Second, HeldLimit: 2}},
		{"exclusive holding", []driver.Value{int64(outcomeLimit), "other", int64(39), expires, nil, int64(1), false, int64(1)},
			backend.Grant{Holder: "other", HolderToken: 39, HolderExpiresAt: expires.UTC(), HolderExpiresIn: time.Microsecond, HeldLimit: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, mock := newMockBackend(t)
			args := append(acquireArgsFor(req, DefaultSweepBatch), sql.Named("limit", int64(3)))
			mock.ExpectQuery(b.q.acquireShared).WithArgs(args...).WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(c.row...))
			g, err := b.Acquire(context.Background(), req)
			if err != nil || g != c.want {
				t.Fatalf("Acquire = %+v, %v; want %+v", g, err, c.want)
			}
		})
	}
}

// TestAcquireExclusiveMeetsARecord: the exclusive batch's refusal for the
// limit (a live record) is HeldLimit, not a busy name.
func TestAcquireExclusiveMeetsARecord(t *testing.T) {
	expires := time.Now().Add(time.Minute)
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "att-1", TTL: 30 * time.Second, Wait: true,
		Queue: backend.QueueRequest{EntryTTL: time.Minute, Pickup: time.Second}}
	b, mock := newMockBackend(t)
	mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(req, DefaultSweepBatch)...).
		WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeLimit), "h", int64(9), expires, nil, int64(1_000_000), false, int64(4)))
	g, err := b.Acquire(context.Background(), req)
	if err != nil || g.Acquired || g.HeldLimit != 4 || g.Holder != "h" || g.HolderToken != 9 || g.Queued {
		t.Fatalf("Acquire = %+v, %v; want refused for limit 4", g, err)
	}
}

// TestAcquireSharedRejectsMalformedLimitAnswers: a refusal for the limit
// must name a holding and a limit other than the request's.
func TestAcquireSharedRejectsMalformedLimitAnswers(t *testing.T) {
	expires := time.Now().Add(time.Minute)
	req := backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "att-1", TTL: 30 * time.Second, Limit: 3}
	for name, row := range map[string][]driver.Value{
		"the request's own limit": {int64(outcomeLimit), "h", int64(9), expires, nil, int64(1), false, int64(3)},
		"no limit":                {int64(outcomeLimit), "h", int64(9), expires, nil, int64(1), false, nil},
		"limit above the maximum": {int64(outcomeLimit), "h", int64(9), expires, nil, int64(1), false, int64(backend.MaxLimit + 1)},
		"no holder":               {int64(outcomeLimit), nil, int64(9), expires, nil, int64(1), false, int64(2)},
		"no time left":            {int64(outcomeLimit), "h", int64(9), expires, nil, int64(0), false, int64(2)},
	} {
		t.Run(name, func(t *testing.T) {
			b, mock := newMockBackend(t)
			mock.ExpectQuery(b.q.acquireShared).WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(row...))
			if g, err := b.Acquire(context.Background(), req); err == nil {
				t.Fatalf("Acquire = %+v, want a fault", g)
			}
		})
	}
}

// TestHolders: every live holding, in the batch's (token) order, each with
// its limit; a malformed one is a fault.
func TestHolders(t *testing.T) {
	expires := time.Date(2026, 3, 1, 12, 0, 30, 0, plus2)
	b, mock := newMockBackend(t)
	mock.ExpectQuery(b.q.holders).WithArgs(sql.Named("name", "job")).WillReturnRows(sqlmock.NewRows(holdingColumns).
		AddRow("a", int64(3), expires, int64(1_000_000), "", int64(2)).
		AddRow("b", int64(5), expires, int64(2_000_000), "m", int64(2)))
	hs, err := b.Holders(context.Background(), "job")
	want := []backend.Holder{
		{Key: "job", Owner: "a", Token: 3, ExpiresAt: expires.UTC(), ExpiresIn: time.Second, Limit: 2},
		{Key: "job", Owner: "b", Token: 5, ExpiresAt: expires.UTC(), ExpiresIn: 2 * time.Second, Metadata: "m", Limit: 2},
	}
	if err != nil || len(hs) != 2 || hs[0] != want[0] || hs[1] != want[1] {
		t.Fatalf("Holders = %+v, %v; want %+v", hs, err, want)
	}

	b, mock = newMockBackend(t)
	mock.ExpectQuery(b.q.holders).WillReturnRows(sqlmock.NewRows(holdingColumns).AddRow("a", int64(3), expires, int64(1), "", int64(0)))
	if hs, err := b.Holders(context.Background(), "job"); err == nil {
		t.Fatalf("Holders of a holding of limit 0 = %+v, want a fault", hs)
	}
	b, _ = newMockBackend(t)
	if _, err := b.Holders(context.Background(), ""); err == nil {
		t.Fatal("Holders of an empty key succeeded")
	}
}

// TestAcquireSharedSQLOrderOfSteps: the shared batch writes the name's row
// (its lock on every engine) before it reads it, reads the clock after
// both, draws tokens only after that, and selects its results after COMMIT.
func TestAcquireSharedSQLOrderOfSteps(t *testing.T) {
	q := newQueries(mustNames(t, "lease", "Leases"), true).acquireShared
	inOrder(t, "acquire shared", q,
		"SET XACT_ABORT ON;",
		"DELETE TOP (@sweep) FROM [lease].[Leases_Holds] WITH (READPAST, ROWLOCK)",
		"BEGIN TRANSACTION;",
		"UPDATE [lease].[Leases] WITH (ROWLOCK, HOLDLOCK)\nSET HolderLimit = HolderLimit\nWHERE "+keyMatch+";",
		"FROM [lease].[Leases] WITH (UPDLOCK, HOLDLOCK, ROWLOCK)",
		"SET @now = SYSDATETIMEOFFSET();",
		"DELETE FROM [lease].[Leases_Holds] WITH (ROWLOCK)",
		"IF @live = 1 AND @heldLimit <> @limit",
		"ELSE IF @holdings >= @limit",
		"SET @handedToken = NEXT VALUE FOR [lease].[Leases_FencingToken];",
		"SET @token = NEXT VALUE FOR [lease].[Leases_FencingToken];",
		"INSERT INTO [lease].[Leases_Holds]",
		"COMMIT TRANSACTION;",
		"SELECT Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, @queued AS Queued, HeldLimit FROM @out;",
	)
	if strings.Count(q, "NEXT VALUE FOR") != 2 || strings.Count(q, "BEGIN TRANSACTION") != 1 || strings.Count(q, "COMMIT TRANSACTION") != 1 {
		t.Error("want two token draws (the hand-offs' and the grant's) and one transaction")
	}
	// A refusal for the limit queues nothing: only a refusal for a full
	// name (before or after the hand-offs) or a turn sets @refused.
	if strings.Count(q, "SET @refused = 1;") != 3 {
		t.Error("want @refused set by the full name, the name filled by hand-offs and the turn only")
	}
	indexOf(t, q, "IF @entryTtlUs > 0 AND @refused = 1")
}

// TestExclusiveBatchesReachTheSharedPartOnlyForARecord: the renewal's shared
// part runs only when no exclusive row was renewed, the release's and the
// revoke's only for a record, and the batch renewal's only when a request
// was not renewed; the exclusive acquire refuses a record without queueing.
func TestExclusiveBatchesReachTheSharedPartOnlyForARecord(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	q := newQueries(n, true)
	inOrder(t, "renew", q.renew, "AND ExpiresAtUtc > @now;", "IF NOT EXISTS (SELECT 1 FROM @out)\n   AND EXISTS (SELECT 1 FROM [lease].[Leases] WHERE "+keyMatch+" AND "+isRecord+")",
		"BEGIN TRANSACTION;", "SET HolderLimit = HolderLimit", "SET @now = SYSDATETIMEOFFSET();", "UPDATE [lease].[Leases_Holds] WITH (ROWLOCK)", "COMMIT TRANSACTION;")
	inOrder(t, "release", q.release, "IF @shared = 1\nBEGIN", "SET HolderLimit = HolderLimit", "DELETE FROM [lease].[Leases_Holds] WITH (ROWLOCK)",
		"END\nELSE IF @match = 1 AND @holderExpires > @now")
	inOrder(t, "revoke", q.revoke, "IF @shared = 1\nBEGIN", "SET HolderLimit = HolderLimit", "FROM [lease].[Leases_Holds]", "END\nELSE\nBEGIN")
	inOrder(t, "acquire", q.acquire, "ELSE IF @shared = 1\nBEGIN", "VALUES (5, @holder", "IF @entryTtlUs > 0 AND @shared = 0")
	batch := renewBatchSQL(n, []int{0, 1, 2}, []int64{1_000_000})
	inOrder(t, "batch renew", batch, "INNER JOIN @req AS r", "IF (SELECT COUNT_BIG(*) FROM @out) < 3\n", "BEGIN TRANSACTION;",
		"SET HolderLimit = m.HolderLimit", "SET @now = SYSDATETIMEOFFSET();", "FROM [lease].[Leases_Holds] AS h WITH (ROWLOCK)", "SET ExpiresAtUtc = x.LastExpires",
		"COMMIT TRANSACTION;", "SELECT LeaseName, OwnerInstanceId, AttemptId, FencingToken, ExpiresAtUtc FROM @out;")
}

// TestSharedHandOnSQL: a freed slot goes to the head live entry of the
// name's limit, entries of another limit ahead of it are dropped, and the
// new holding gets a token after the lock and the entry's pickup window.
func TestSharedHandOnSQL(t *testing.T) {
	q := builder(mustNames(t, "lease", "Leases"))(sharedHandOnFragment)
	inOrder(t, "shared hand-on", q,
		"WHERE "+keyMatch+" AND HolderLimit = @heldLimit AND EntryExpiresAtUtc > @now\n        ORDER BY Position;",
		"HolderLimit <> @heldLimit AND (@headPosition IS NULL OR Position < @headPosition);",
		"IF @headPosition IS NOT NULL",
		"SET @handedToken = NEXT VALUE FOR [lease].[Leases_FencingToken];",
		addMicros("@headPickupUs", "@now"),
		"SET FencingToken = @handedToken",
	)
}

// TestAcquireSharedHandsFreeSlotsSQL: while the name has live holdings, the
// shared acquire hands its free slots to the entries ahead of the caller
// before the heads' turns, in queue order, each with a token drawn after
// the lock and the entry's pickup window, skipping entries of another limit
// or of an attempt that holds; the record takes the last token; a name the
// hand-offs fill refuses the caller naming the holding that ends first,
// read after them; otherwise the turns and the grant follow.
func TestAcquireSharedHandsFreeSlotsSQL(t *testing.T) {
	q := newQueries(mustNames(t, "lease", "Leases"), true).acquireShared
	inOrder(t, "acquire shared", q,
		"SET @now = SYSDATETIMEOFFSET();",
		"ELSE IF @holdings >= @limit",
		"SET @free = @limit - @holdings;",
		"IF @live = 1\n        BEGIN",
		"SELECT @myPosition = Position FROM [lease].[Leases_Queue] WHERE "+keyMatch+" AND "+holdingMatch+";",
		"WHILE @free > 0",
		"WHERE "+keyMatch+" AND (@myPosition IS NULL OR Position < @myPosition)\n                ORDER BY Position;",
		"IF @headPosition IS NULL\n                    BREAK;",
		"WHERE "+keyMatch+" AND Position = @headPosition;",
		"IF @headLimit = @limit\n                   AND NOT EXISTS (SELECT 1 FROM [lease].[Leases_Holds] WHERE "+keyMatch+" AND AttemptId = @handedAttempt)",
		"SET @handedToken = NEXT VALUE FOR [lease].[Leases_FencingToken];",
		"SET @handedExpires = "+addMicros("@headPickupUs", "@now")+";",
		"SET @free = @free - 1;",
		"SET FencingToken = @handedToken,",
		"IF @free = 0",
		"SET @refused = 1;",
		"ORDER BY ExpiresAtUtc, FencingToken;",
		"VALUES (0, @holder, @holderToken, @holderExpires, NULL,",
		"WHILE 1 = 1",
		"SET TurnStartedAtUtc = @now",
		"SET @token = NEXT VALUE FOR [lease].[Leases_FencingToken];",
		"COMMIT TRANSACTION;",
	)
}

// TestKeepTrigger: the trigger refuses only the deletion of a live record or
// its change into another kind of row, and tests the attempt first.
func TestKeepTrigger(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	tr := keepTrigger(n)
	inOrder(t, "keep trigger", tr,
		"CREATE TRIGGER [lease].[TR_Leases_KeepShared] ON [lease].[Leases] AFTER UPDATE, DELETE AS",
		"IF EXISTS (SELECT 1 FROM deleted WHERE AttemptId = N'')",
		"d.AttemptId = N'' AND d.HolderLimit > 1 AND d.ExpiresAtUtc > SYSDATETIMEOFFSET()",
		"NOT EXISTS (SELECT 1 FROM inserted AS i",
		"THROW 50102,",
	)
	ddl := ddlStatements(n)
	want := "IF OBJECT_ID(N'[lease].[TR_Leases_KeepShared]', N'TR') IS NULL\n    EXEC sys.sp_executesql " + quoteLiteral(tr) + ";"
	if ddl[len(ddl)-1] != want {
		t.Errorf("last DDL statement = %s\nwant %s", ddl[len(ddl)-1], want)
	}
}

// TestSharedGrantConfirmedByALaterRecordWrite: a grant of a name with
// several holders is confirmed on the replica by a later write of its
// record, whose token and owner other grants have moved on since.
func TestSharedGrantConfirmedByALaterRecordWrite(t *testing.T) {
	replicaDB, replica := newMockDB(t)
	b, primary := newMockBackend(t, WithReplica(replicaDB), WithReplicaTimeout(time.Minute), WithReplicaPollInterval(time.Millisecond))
	rv := []byte{0, 0, 0, 0, 0, 0, 1, 0}
	expires := time.Now().Add(time.Minute)
	primary.ExpectQuery(b.q.acquireShared).
		WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeInserted), "me", int64(8), expires, rv, nil, false, nil))
	replica.ExpectQuery(b.q.replica).WithArgs(sql.Named("name", "job")).
		WillReturnRows(sqlmock.NewRows(replicaColumns).AddRow([]byte{0, 0, 0, 0, 0, 0, 0, 9}, "old", int64(7))) // older write
	replica.ExpectQuery(b.q.replica).WithArgs(sql.Named("name", "job")).
		WillReturnRows(sqlmock.NewRows(replicaColumns).AddRow([]byte{0, 0, 0, 0, 0, 0, 1, 7}, recordOwner, int64(12)))
	g, err := b.Acquire(context.Background(), backend.AcquireRequest{Key: "job", Owner: "me", Attempt: "att-1", TTL: time.Minute, Limit: 2})
	if err != nil || !g.Acquired || g.Token != 8 {
		t.Fatalf("Acquire = %+v, %v; want granted and confirmed", g, err)
	}
}
