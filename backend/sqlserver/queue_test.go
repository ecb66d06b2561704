package sqlserver

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/leasehold/leasehold/backend"
)

// There is no SQL Server here to run the queue's statements: these tests
// check what can be checked without one. The parameters each queue path
// binds and how the backend decodes each answer (go-sqlmock), and the shape
// of the statements each path relies on: which statement runs under which
// condition, in which order, with which filters (text checks on the batches
// the backend builds). TestTSQLGrammar parses all of them. What the
// statements do on a real server, and how they lock, runs only in
// TestConformance (group Queue) and TestRealServerQueue* with
// LEASEHOLD_SQLSERVER_DSN.

// queueReq is a waiting, queueing acquire of "job" by attempt.
func queueReq(attempt string, poll uint64) backend.AcquireRequest {
	return backend.AcquireRequest{
		Key: "job", Owner: "w", Attempt: attempt, TTL: time.Minute, Metadata: "md", Wait: true,
		Queue: backend.QueueRequest{EntryTTL: 30 * time.Second, Pickup: 2*time.Second + 1, Poll: poll},
	}
}

// TestAcquireQueueBinding: a waiting acquire with a QueueRequest binds the
// entry's TTL and pickup window in microseconds (rounded up, like the TTL)
// and its poll number; anything else binds zeros, which the batch reads as
// "do not queue".
func TestAcquireQueueBinding(t *testing.T) {
	noWait := queueReq("a", 0)
	noWait.Wait, noWait.Queue = false, backend.QueueRequest{}
	waitOnly := queueReq("a", 0)
	waitOnly.Queue = backend.QueueRequest{}
	hugePoll := queueReq("a", math.MaxUint64)
	cases := []struct {
		name                   string
		req                    backend.AcquireRequest
		entryTTL, pickup, poll int64
	}{
		{"waiting with a queue request", queueReq("a", 7), 30_000_000, 2_000_001, 7},
		{"without Wait", noWait, 0, 0, 0},
		{"waiting without a queue request", waitOnly, 0, 0, 0},
		// The poll number saturates instead of wrapping to a negative BIGINT.
		{"huge poll number", hugePoll, 30_000_000, 2_000_001, math.MaxInt64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, mock := newMockBackend(t)
			mock.ExpectQuery(b.q.acquire).
				WithArgs(sql.Named("name", "job"), sql.Named("owner", "w"), sql.Named("attempt", "a"), sql.Named("ttlUs", int64(60_000_000)),
					sql.Named("metadata", "md"), sql.Named("entryTtlUs", c.entryTTL), sql.Named("pickupUs", c.pickup), sql.Named("poll", c.poll),
					sql.Named("sweep", int64(DefaultSweepBatch))).
				WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(int64(outcomeBusy), "h", int64(3), time.Now(), nil, int64(1), false, nil))
			if _, err := b.Acquire(context.Background(), c.req); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAcquireQueueAnswers: how each queue path's answer decodes. The batch
// reports whether the attempt has an entry after it (Queued) with every
// refusal, and the head's turn as a refusal without a holder.
func TestAcquireQueueAnswers(t *testing.T) {
	until := time.Date(2026, 3, 1, 12, 0, 30, 0, plus2)
	rv := []byte{0, 0, 0, 0, 0, 0, 1, 2}
	cases := []struct {
		name string
		req  backend.AcquireRequest
		row  []driver.Value
		want backend.Grant
	}{
		// Refused by a live holding and put at the tail of the queue.
		{"enqueued", queueReq("a", 1),
			[]driver.Value{int64(outcomeBusy), "h", int64(3), until, nil, int64(4_000_000), true, nil},
			backend.Grant{Holder: "h", HolderToken: 3, HolderExpiresAt: until.UTC(), HolderExpiresIn: 4 * time.Second, Queued: true}},
		// The same attempt again (its next poll): still refused, still
		// queued; the batch renewed its entry in place.
		{"keeps its place", queueReq("a", 2),
			[]driver.Value{int64(outcomeBusy), "h", int64(3), until, nil, int64(3_000_000), true, nil},
			backend.Grant{Holder: "h", HolderToken: 3, HolderExpiresAt: until.UTC(), HolderExpiresIn: 3 * time.Second, Queued: true}},
		// MaxQueueEntries live entries: refused, not queued (it polls).
		{"queue full", queueReq("late", 1),
			[]driver.Value{int64(outcomeBusy), "h", int64(3), until, nil, int64(3_000_000), false, nil},
			backend.Grant{Holder: "h", HolderToken: 3, HolderExpiresAt: until.UTC(), HolderExpiresIn: 3 * time.Second}},
		// The name is free but the head (another attempt) has the turn:
		// no holder, no token, the turn's end and its time left.
		{"head's turn", queueReq("b", 1),
			[]driver.Value{int64(outcomeTurn), nil, nil, until, nil, int64(1_500_000), true, nil},
			backend.Grant{HolderExpiresAt: until.UTC(), HolderExpiresIn: 1500 * time.Millisecond, Queued: true}},
		// A one-shot acquire during the turn is refused the same way and
		// queued nowhere.
		{"head's turn, not waiting", backend.AcquireRequest{Key: "job", Owner: "n", Attempt: "n1", TTL: time.Minute},
			[]driver.Value{int64(outcomeTurn), nil, nil, until, nil, int64(1), false, nil},
			backend.Grant{HolderExpiresAt: until.UTC(), HolderExpiresIn: time.Microsecond}},
		// A hand-off picked up: the attempt's own live holding (made by a
		// release) is refreshed to the full TTL with its token.
		{"pickup", queueReq("a", 3),
			[]driver.Value{int64(outcomeRefresh), "w", int64(44), until, rv, nil, false, nil},
			backend.Grant{Acquired: true, Token: 44, ExpiresAt: until.UTC()}},
		// The head after its turn, or after expiry, is granted as usual.
		{"head granted", queueReq("a", 4),
			[]driver.Value{int64(outcomeTakeover), "w", int64(45), until, rv, nil, false, nil},
			backend.Grant{Acquired: true, Token: 45, ExpiresAt: until.UTC()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, mock := newMockBackend(t)
			mock.ExpectQuery(b.q.acquire).WithArgs(acquireArgsFor(c.req, DefaultSweepBatch)...).
				WillReturnRows(sqlmock.NewRows(acquireColumns).AddRow(c.row...))
			g, err := b.Acquire(context.Background(), c.req)
			if err != nil {
				t.Fatal(err)
			}
			if g != c.want {
				t.Errorf("grant = %+v\nwant    %+v", g, c.want)
			}
		})
	}
}

// TestReleaseHandOffAnswers: the release batch answers whether a holding
// matched and to whom it was handed; the backend logs the hand-off and
// rejects an answer that cannot be one.
func TestReleaseHandOffAnswers(t *testing.T) {
	req := backend.ReleaseRequest{Key: "job", Owner: "a", Attempt: "a1", Token: 42}
	args := []driver.Value{sql.Named("name", "job"), sql.Named("owner", "a"), sql.Named("attempt", "a1"), sql.Named("token", int64(42))}

	t.Run("handed on", func(t *testing.T) {
		var log bytes.Buffer
		b, mock := newMockBackend(t, WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		mock.ExpectQuery(b.q.release).WithArgs(args...).
			WillReturnRows(sqlmock.NewRows(releaseColumns).AddRow(int64(1), "w1", "w1-att", int64(43), int64(9)))
		if err := b.Release(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"released and handed on", "to_owner=w1", "to_attempt=w1-att", "to_token=43", "to_poll=9"} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, log.String())
			}
		}
	})

	// A waiter leaving: Release(attempt, 0) matches no holding and removes
	// the attempt's entry; nil, as for any release that matches nothing.
	t.Run("leaving the queue", func(t *testing.T) {
		b, mock := newMockBackend(t)
		mock.ExpectQuery(b.q.release).
			WithArgs(sql.Named("name", "job"), sql.Named("owner", "w"), sql.Named("attempt", "w-att"), sql.Named("token", int64(0))).
			WillReturnRows(releaseRows(0))
		if err := b.Release(context.Background(), backend.ReleaseRequest{Key: "job", Owner: "w", Attempt: "w-att"}); err != nil {
			t.Fatal(err)
		}
	})

	for name, row := range map[string][]driver.Value{
		"released twice":                {int64(2), nil, nil, nil, nil},
		"handed on without a release":   {int64(0), "w1", "w1-att", int64(43), int64(9)},
		"hand-off without a token":      {int64(1), "w1", "w1-att", nil, int64(9)},
		"hand-off with token 0":         {int64(1), "w1", "w1-att", int64(0), int64(9)},
		"hand-off without an attempt":   {int64(1), "w1", nil, int64(43), int64(9)},
		"hand-off without a poll":       {int64(1), "w1", "w1-att", int64(43), nil},
		"hand-off to no owner":          {int64(1), nil, "w1-att", int64(43), int64(9)},
		"hand-off fields of no holding": {int64(0), nil, nil, int64(43), nil},
	} {
		t.Run(name, func(t *testing.T) {
			b, mock := newMockBackend(t)
			mock.ExpectQuery(b.q.release).WithArgs(args...).WillReturnRows(sqlmock.NewRows(releaseColumns).AddRow(row...))
			if err := b.Release(context.Background(), req); err == nil {
				t.Fatal("a malformed release answer was accepted")
			}
		})
	}
}

// section returns the text of q from the first from to the first to after
// it, failing the test when either is missing.
func section(t *testing.T, q, from, to string) string {
	t.Helper()
	i := indexOf(t, q, from)
	return q[i : i+indexOf(t, q[i:], to)]
}

// inOrder fails the test unless each of subs occurs in q after the one
// before it.
func inOrder(t *testing.T, name, q string, subs ...string) {
	t.Helper()
	at := 0
	for _, s := range subs {
		i := strings.Index(q[at:], s)
		if i < 0 {
			t.Errorf("%s: %q missing, or not after %q:\n%s", name, s, q[:at], numbered(q))
			return
		}
		at += i + len(s)
	}
}

// TestAcquireSQLQueue checks the queue steps of the acquire batch: all of
// them under the name's lock, after the clock read; expired entries dropped
// first; the head's turn before any grant; the caller's entry removed when
// granted, else kept in place, or added at the tail of a queue not full.
func TestAcquireSQLQueue(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	q := exclusiveQueries(n, false).acquire
	const queue = "[lease].[Leases_Queue]"
	inOrder(t, "acquire", q,
		"BEGIN TRANSACTION;",
		"FROM [lease].[Leases] WITH (UPDLOCK, HOLDLOCK, ROWLOCK)",
		"SET @now = SYSDATETIMEOFFSET();",
		// Expired entries are gone before the queue is read.
		"DELETE FROM "+queue+" WITH (ROWLOCK)\nWHERE "+keyMatch+"\n  AND EntryExpiresAtUtc <= @now;",
		// A free name (no row, or an expired one): the head, in arrival order.
		"IF @found = 0 OR @holderExpires <= @now",
		"SELECT TOP (1) @headPosition = Position,",
		"@headMine = CASE WHEN "+holdingMatch+" THEN 1 ELSE 0 END,",
		"FROM "+queue+"\n    WHERE "+keyMatch+"\n    ORDER BY Position;",
		// Another attempt at the head: its turn starts now unless it did.
		"IF @headPosition IS NOT NULL AND @headMine = 0",
		"IF @turnStart IS NULL",
		"SET @turnStart = @now;",
		"SET TurnStartedAtUtc = @now\n            WHERE "+keyMatch+" AND Position = @headPosition;",
		"SET @turnEnd = "+addMicros("@headPickupUs", "@turnStart")+";",
		// Its turn over: it leaves the queue, and the caller goes on.
		"IF @turnEnd <= @now",
		"DELETE FROM "+queue+" WITH (ROWLOCK)\n            WHERE "+keyMatch+" AND Position = @headPosition;",
		"SET @turnEnd = NULL;",
		// The turn is decided before any grant.
		"IF @turnEnd IS NOT NULL",
		"VALUES (4, NULL, NULL, @turnEnd, NULL, DATEDIFF_BIG(MICROSECOND, @now, @turnEnd));",
		"ELSE IF @found = 0",
		"ELSE IF @holderExpires <= @now",
		"ELSE IF @mine = 1",
		// Granted: the caller's own entry goes.
		"IF @granted = 1",
		"DELETE FROM "+queue+" WITH (ROWLOCK)\n    WHERE "+keyMatch+" AND "+holdingMatch+";",
		// Refused and queueing: keep the place, or take one at the tail.
		"IF @entryTtlUs > 0",
		"UPDATE "+queue+" WITH (ROWLOCK)",
		"SET @renewed = @@ROWCOUNT;",
		"IF @renewed = 0",
		"INSERT INTO "+queue+" (LeaseName, LeaseNameBytes, AttemptId, OwnerInstanceId, Metadata, PickupUs, Poll, EnqueuedAtUtc, EntryExpiresAtUtc)\n"+
			"            VALUES (@name, DATALENGTH(@name), @attempt, @owner, @metadata, @pickupUs, @poll, @now, "+addMicros("@entryTtlUs", "@now")+");",
		"IF EXISTS (SELECT 1 FROM "+queue+" WHERE "+keyMatch+" AND "+holdingMatch+")\n        SET @queued = 1;",
		"COMMIT TRANSACTION;",
		"SELECT Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, @queued AS Queued, HeldLimit FROM @out;",
	)

	// Every granting branch marks the grant, so the caller's entry goes.
	for _, branch := range []string{"ELSE IF @found = 0", "ELSE IF @holderExpires <= @now", "ELSE IF @mine = 1"} {
		if !strings.HasPrefix(strings.TrimSpace(section(t, q, branch, "OUTPUT")[len(branch):]), "BEGIN\n    SET @granted = 1;") {
			t.Errorf("%s: the grant does not set @granted first", branch)
		}
	}
	// Keeping the place: the renewal matches the caller's own entry and
	// renews its expiry, pickup window, poll number and metadata, never
	// its position, arrival or turn.
	renewal := section(t, q, "UPDATE "+queue+" WITH (ROWLOCK)\n        SET EntryExpiresAtUtc", "SET @renewed")
	indexOf(t, renewal, "SET EntryExpiresAtUtc = "+addMicros("@entryTtlUs", "@now")+",")
	indexOf(t, renewal, "PickupUs = @pickupUs,")
	indexOf(t, renewal, "Poll = @poll,")
	indexOf(t, renewal, "WHERE "+keyMatch+" AND "+holdingMatch+";")
	for _, col := range []string{"Position", "EnqueuedAtUtc", "TurnStartedAtUtc", "AttemptId =", "OwnerInstanceId ="} {
		if strings.Contains(strings.ReplaceAll(renewal, holdingMatch, ""), col) {
			t.Errorf("the renewal of an entry changes %s:\n%s", col, renewal)
		}
	}
	// The bound: a new entry only when the attempt has none (of any owner:
	// the attempt is unique in the name's queue) and fewer than
	// MaxQueueEntries live entries are queued (expired ones were dropped
	// above, with the same clock read).
	guard := section(t, q, "IF @renewed = 0", "BEGIN")
	indexOf(t, guard, "AND NOT EXISTS (SELECT 1 FROM "+queue+" WHERE "+keyMatch+" AND AttemptId = @attempt)")
	indexOf(t, guard, "AND (SELECT COUNT_BIG(*) FROM "+queue+" WHERE "+keyMatch+") < "+strconv.Itoa(backend.MaxQueueEntries))
	// Nothing touches the queue outside the transaction but the sweep,
	// which deletes only expired entries.
	before := q[:indexOf(t, q, "BEGIN TRANSACTION;")]
	after := q[indexOf(t, q, "COMMIT TRANSACTION;"):]
	if strings.Contains(before, queue) || strings.Contains(after, queue) {
		t.Error("the queue is touched outside the transaction")
	}
	swept := exclusiveQueries(n, true).acquire
	indexOf(t, swept, "DELETE TOP (@sweep) FROM "+queue+" WITH (READPAST, ROWLOCK)\n    WHERE EntryExpiresAtUtc <= SYSDATETIMEOFFSET();")
}

// TestReleaseSQLHandOff checks the release batch's queue steps: under the
// name's lock, the leaving attempt's entry and the expired ones go whatever
// matched; a live holding that matched is handed to the head entry, which
// leaves the queue, with a new token from the sequence and the entry's
// pickup window; an expired one is only deleted.
func TestReleaseSQLHandOff(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	q := exclusiveQueries(n, true).release
	const queue = "[lease].[Leases_Queue]"
	inOrder(t, "release", q,
		"SET XACT_ABORT ON;",
		"SET TRANSACTION ISOLATION LEVEL READ COMMITTED;",
		"BEGIN TRANSACTION;",
		"FROM [lease].[Leases] WITH (UPDLOCK, HOLDLOCK, ROWLOCK)",
		"SET @now = SYSDATETIMEOFFSET();",
		// Leaving (and expired entries), before and outside any IF.
		"DELETE FROM "+queue+" WITH (ROWLOCK)\nWHERE "+keyMatch+"\n  AND (EntryExpiresAtUtc <= @now OR ("+holdingMatch+"));",
		"IF @match = 1 AND @holderExpires > @now",
		"SET @released = 1;",
		"SELECT TOP (1) @headPosition = Position,",
		"FROM "+queue+"\n    WHERE "+keyMatch+" AND HolderLimit = 1\n    ORDER BY Position;",
		"IF @headPosition IS NULL",
		"DELETE FROM [lease].[Leases] WITH (ROWLOCK)\n        WHERE "+keyMatch+" AND FencingToken = @holderToken;",
		"ELSE",
		"DELETE FROM "+queue+" WITH (ROWLOCK)\n        WHERE "+keyMatch+" AND Position = @headPosition;",
		"SET @handedToken = NEXT VALUE FOR [lease].[Leases_FencingToken];",
		"UPDATE [lease].[Leases] WITH (ROWLOCK)",
		"SET OwnerInstanceId = @handedOwner,\n            AttemptId = @handedAttempt,\n            FencingToken = @handedToken,",
		"ExpiresAtUtc = "+addMicros("@headPickupUs", "@now")+",",
		"Metadata = @headMetadata\n        WHERE "+keyMatch+" AND FencingToken = @holderToken;",
		"ELSE IF @match = 1",
		"COMMIT TRANSACTION;",
		"SELECT @released AS Released,",
	)
	if strings.Count(q, "NEXT VALUE FOR") != 1 {
		t.Error("release draws a token other than the hand-off's")
	}
	if leave := section(t, q, "SET @now", "IF @shared = 1"); strings.Contains(leave, "IF ") {
		t.Errorf("removing the leaving attempt's entry is conditional:\n%s", leave)
	}
}

// TestRevokeSQLHandsOn: Revoke locks the name like a release, ends only a
// live holding of the token asked (0: any), and hands it on with the same
// statements as a release.
func TestRevokeSQLHandsOn(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	q := exclusiveQueries(n, true)
	handOn := section(t, q.release, "    SELECT TOP (1) @headPosition", "END\nELSE IF @match = 1")
	inOrder(t, "revoke", q.revoke,
		"SET XACT_ABORT ON;",
		"BEGIN TRANSACTION;",
		"SELECT @holderToken = FencingToken,",
		"FROM [lease].[Leases] WITH (UPDLOCK, HOLDLOCK, ROWLOCK)\nWHERE "+keyMatch+";",
		"SET @now = SYSDATETIMEOFFSET();",
		"WHERE "+keyMatch+"\n      AND ExpiresAtUtc > @now\n      AND (@token = 0 OR FencingToken = @token);",
		"SET @revoked = @@ROWCOUNT;",
		"DELETE FROM [lease].[Leases_Queue] WITH (ROWLOCK)\nWHERE "+keyMatch+"\n  AND EntryExpiresAtUtc <= @now;",
		"IF @revoked > 0\n    BEGIN\n"+handOn+"    END;",
		"COMMIT TRANSACTION;",
		"FROM @out;",
	)
	if strings.Count(q.revoke, "DELETE FROM [lease].[Leases] ") != 1 {
		t.Error("revoke deletes the holding other than through the hand-on")
	}
}

// TestNextValueForSyntaxOfHandOn: the hand-on's NEXT VALUE FOR (release,
// revoke) is a plain assignment after the lock, rewritten for the grammar
// like the acquire's (see forGrammar).
func TestNextValueForSyntaxOfHandOn(t *testing.T) {
	for _, tn := range grammarNames {
		n := mustNames(t, tn.schema, tn.table)
		q := exclusiveQueries(n, true)
		for name, text := range map[string]string{"release": q.release, "revoke": q.revoke} {
			want := "SET @handedToken = NEXT VALUE FOR " + n.sequenceQ + ";"
			if strings.Count(text, want) != 1 || strings.Count(text, "NEXT VALUE FOR") != 1 {
				t.Errorf("%s %s: NEXT VALUE FOR is not once %q", name, n, want)
			}
			if indexOf(t, text, want) < indexOf(t, text, "WITH (UPDLOCK, HOLDLOCK, ROWLOCK)") {
				t.Errorf("%s %s: token drawn before the lock", name, n)
			}
			if g := forGrammar(text); strings.Contains(g, "NEXT VALUE FOR") {
				t.Errorf("%s %s: the grammar substitution missed a NEXT VALUE FOR", name, n)
			}
		}
	}
}

// TestQueueNamesFitTheTableLimit: the queue's derived names are no longer
// than CK_table_LeaseNameBytes, so the longest table name allowed before
// the queue existed is still allowed, and one unit more is not.
func TestQueueNamesFitTheTableLimit(t *testing.T) {
	n := mustNames(t, "lease", strings.Repeat("t", 110))
	for _, name := range []string{n.queueQ[len("[lease]."):], n.pkQueue, n.uqQueueAttempt, n.ckQueueBytes, n.ixQueueExpires} {
		if units := utf16Len(name) - 2; units > maxIdentifierUnits { // without the brackets
			t.Errorf("%s: %d units", name, units)
		}
	}
	if err := ValidateTable("lease", strings.Repeat("t", 111)); err == nil {
		t.Error("a table name one unit too long was accepted")
	}
}
