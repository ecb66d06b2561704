package sqlserver

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func mustNames(t *testing.T, schema, table string) objectNames {
	t.Helper()
	n, err := newObjectNames(schema, table)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// indexOf fails the test when sub is missing from s.
// exclusiveQueries are n's batches without the parts that run only for a
// name with several holders (shared.go), so that the tests of the
// exclusive statements read them as they were.
func exclusiveQueries(n objectNames, sweep bool) queries {
	build := builder(n)
	strip := func(text string) string {
		for _, f := range []string{recordRefusalFragment, sharedRenewFragment, sharedReleaseFragment, sharedRevokeFragment, sharedDeclarations} {
			text = strings.Replace(text, build(f), "", 1)
		}
		return text
	}
	q := newQueries(n, sweep)
	q.acquire, q.renew, q.release, q.revoke = strip(q.acquire), strip(q.renew), strip(q.release), strip(q.revoke)
	return q
}

func indexOf(t *testing.T, s, sub string) int {
	t.Helper()
	i := strings.Index(s, sub)
	if i < 0 {
		t.Fatalf("SQL lacks %q:\n%s", sub, s)
	}
	return i
}

func TestAcquireSQLOrderOfSteps(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true).acquire

	xact := indexOf(t, q, "SET XACT_ABORT ON;")
	sweep := indexOf(t, q, "DELETE TOP (@sweep) FROM [lease].[Leases] WITH (READPAST, ROWLOCK)")
	sweepQueue := indexOf(t, q, "DELETE TOP (@sweep) FROM [lease].[Leases_Queue] WITH (READPAST, ROWLOCK)")
	begin := indexOf(t, q, "BEGIN TRANSACTION;")
	lock := indexOf(t, q, "FROM [lease].[Leases] WITH (UPDLOCK, HOLDLOCK, ROWLOCK)")
	now := indexOf(t, q, "SET @now = SYSDATETIMEOFFSET();")
	queue := indexOf(t, q, "[lease].[Leases_Queue] WITH (ROWLOCK)")
	commit := indexOf(t, q, "COMMIT TRANSACTION;")
	result := indexOf(t, q, "SELECT Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, @queued AS Queued, HeldLimit FROM @out;")

	// The sweeps are their own statements before the transaction; the lock
	// comes before the clock read, and both before the first statement on
	// the queue (which only the name's lock serializes); results are
	// selected after COMMIT.
	if !(xact < sweep && sweep < sweepQueue && sweepQueue < begin && begin < lock && lock < now && now < queue && queue < commit && commit < result) {
		t.Errorf("steps out of order: xact %d sweep %d queue sweep %d begin %d lock %d now %d queue %d commit %d result %d",
			xact, sweep, sweepQueue, begin, lock, now, queue, commit, result)
	}
	if n := strings.Count(q, "SYSDATETIMEOFFSET()"); n != 4 { // the three sweeps' and the transaction's
		t.Errorf("SYSDATETIMEOFFSET() appears %d times, want 4 (three sweeps, then once in the transaction)", n)
	}
	if strings.Count(q, "BEGIN TRANSACTION") != 1 || strings.Count(q, "COMMIT TRANSACTION") != 1 {
		t.Error("want exactly one BEGIN TRANSACTION and one COMMIT TRANSACTION")
	}
	if strings.Contains(strings.ToUpper(q), "MERGE") {
		t.Error("acquire must not use MERGE (NEXT VALUE FOR is not allowed in it)")
	}
}

func TestAcquireSQLTokenOnlyFromSequenceAfterLock(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true).acquire
	lock := indexOf(t, q, "WITH (UPDLOCK, HOLDLOCK, ROWLOCK)")
	draws := regexp.MustCompile(`NEXT VALUE FOR[^\n]*`).FindAllStringIndex(q, -1)
	if len(draws) != 2 {
		t.Fatalf("NEXT VALUE FOR appears %d times, want 2 (insert, takeover)", len(draws))
	}
	for _, d := range draws {
		line := q[d[0]:d[1]]
		if line != "NEXT VALUE FOR [lease].[Leases_FencingToken];" {
			t.Errorf("token drawn outside a plain assignment: %q", line)
		}
		if !strings.HasSuffix(strings.TrimRight(q[:d[0]], " "), "SET @token =") {
			t.Errorf("NEXT VALUE FOR is not assigned to @token")
		}
		if d[0] < lock {
			t.Error("token drawn before the lock")
		}
	}
	// The refresh branch keeps the token: its UPDATE must not set FencingToken.
	refresh := q[indexOf(t, q, "ELSE IF @mine = 1"):indexOf(t, q, "OUTPUT 3")]
	if strings.Contains(refresh, "FencingToken") {
		t.Errorf("refresh branch changes the token:\n%s", refresh)
	}
}

func TestAcquireSQLOutputsIntoTableVariable(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true).acquire
	outputs := regexp.MustCompile(`OUTPUT ([0-9]), inserted\.OwnerInstanceId, inserted\.FencingToken, inserted\.ExpiresAtUtc, inserted\.\[RowVersion\]\s+INTO @out \(Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer\)`).FindAllStringSubmatch(q, -1)
	var got []string
	for _, o := range outputs {
		got = append(got, o[1])
	}
	if strings.Join(got, ",") != "1,2,3" {
		t.Errorf("OUTPUT ... INTO @out outcomes = %v, want 1,2,3 (insert, takeover, refresh)", got)
	}
	if strings.Count(q, "OUTPUT ") != 3 {
		t.Error("an OUTPUT clause sends rows to the client instead of @out")
	}
	// A refusal reports the holder's token and its remaining time measured
	// against the same clock read that decided it is live.
	indexOf(t, q, "VALUES (0, @holder, @holderToken, @holderExpires, NULL, DATEDIFF_BIG(MICROSECOND, @now, @holderExpires));")
}

// TestAcquireSQLRefreshesOnlyTheSameAttempt: the refresh branch is taken only
// when the live row is this attempt's (owner and AttemptId), and every new
// holding records its attempt.
func TestAcquireSQLRefreshesOnlyTheSameAttempt(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true).acquire
	indexOf(t, q, "@mine = CASE WHEN "+holdingMatch+" THEN 1 ELSE 0 END")
	indexOf(t, holdingMatch, "AttemptId = @attempt")
	indexOf(t, q, "VALUES (@name, DATALENGTH(@name), @owner, @attempt, @token, @now, @now, "+expiresFromNow+", @metadata);")
	takeover := q[indexOf(t, q, "ELSE IF @holderExpires <= @now"):indexOf(t, q, "OUTPUT 2")]
	indexOf(t, takeover, "AttemptId = @attempt,")
	refresh := q[indexOf(t, q, "ELSE IF @mine = 1"):indexOf(t, q, "OUTPUT 3")]
	if strings.Contains(refresh, "AttemptId") || strings.Contains(refresh, "OwnerInstanceId") {
		t.Errorf("refresh branch changes the holding's identity:\n%s", refresh)
	}
}

// TestAcquireSQLDurabilityGuardFirst: the batch refuses a database forcing
// delayed durability before it writes anything (sweep included).
func TestAcquireSQLDurabilityGuardFirst(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true).acquire
	guard := indexOf(t, q, "IF EXISTS (SELECT 1 FROM sys.databases WHERE database_id = DB_ID() AND delayed_durability = 2)")
	indexOf(t, q, fmt.Sprintf("THROW %d, N'", errDelayedDurabilityNumber))
	if sweep := indexOf(t, q, "DELETE TOP"); guard > sweep || guard > indexOf(t, q, "BEGIN TRANSACTION") {
		t.Error("the durability guard runs after a write")
	}
}

func TestAcquireSQLComparesNamesExactly(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true)
	for name, text := range map[string]string{"acquire": q.acquire, "renew": q.renew, "release": q.release, "replica": q.replica} {
		// Every lookup of the row compares the byte length too, because '='
		// ignores trailing spaces even under a binary collation.
		if n := strings.Count(text, "LeaseName = @name"); n == 0 || n != strings.Count(text, keyMatch) {
			t.Errorf("%s: %d name comparisons, %d with DATALENGTH", name, n, strings.Count(text, keyMatch))
		}
		assignments := strings.Count(text, "SET OwnerInstanceId = @owner,") // the takeover's
		if n := strings.Count(text, "OwnerInstanceId = @owner") - assignments; n != strings.Count(text, holdingMatch) {
			t.Errorf("%s: an owner comparison lacks DATALENGTH or the attempt", name)
		}
	}
	// The lease row's holding is compared once where the batch decides
	// (the acquire's and the release's lock, the renew's WHERE); the other
	// comparisons are of queue entries, and the release's final DELETE of
	// an expired holding repeats its filter.
	lock := func(text string) string {
		return text[indexOf(t, text, "BEGIN TRANSACTION;"):indexOf(t, text, "SET @now = SYSDATETIMEOFFSET();")]
	}
	if strings.Count(lock(q.acquire), holdingMatch) != 1 || strings.Count(lock(q.release), holdingMatch) != 1 || strings.Count(q.renew, holdingMatch) != 1 {
		t.Error("want exactly one holding comparison (owner and attempt) deciding on the lease row")
	}
	if n := strings.Count(q.acquire, holdingMatch); n != 5 { // lock, head, granted's entry, renewal, Queued
		t.Errorf("acquire: %d holding comparisons, want 5", n)
	}
	if n := strings.Count(q.release, holdingMatch); n != 3 { // lock, leaving entry, expired holding's DELETE
		t.Errorf("release: %d holding comparisons, want 3", n)
	}
	// The owner test of the acquire reads the column (binary collation), not
	// a variable, which would have the database's default collation.
	indexOf(t, q.acquire, "@mine = CASE WHEN "+holdingMatch+" THEN 1 ELSE 0 END")
	if strings.Contains(q.acquire, "@holder = @owner") {
		t.Error("owner compared through a variable")
	}
}

func TestAcquireSQLWithoutSweep(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), false).acquire
	if strings.Contains(q, "DELETE TOP") || strings.Contains(q, "READPAST") || strings.Contains(q, "{sweep}") {
		t.Errorf("sweep disabled but the batch still sweeps:\n%s", q)
	}
	indexOf(t, q, "BEGIN TRANSACTION;")
}

func TestRenewSQLFilters(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true).renew
	indexOf(t, q, "SET XACT_ABORT ON;")
	where := q[indexOf(t, q, "WHERE"):]
	for _, want := range []string{keyMatch, holdingMatch, "FencingToken = @token", "ExpiresAtUtc > @now"} {
		indexOf(t, where, want)
	}
	set := q[indexOf(t, q, "SET RenewedAtUtc"):indexOf(t, q, "OUTPUT")]
	if strings.Contains(set, "FencingToken") || strings.Contains(set, "OwnerInstanceId") || strings.Contains(set, "AttemptId") {
		t.Errorf("renew changes the token or owner:\n%s", set)
	}
	indexOf(t, q, "OUTPUT inserted.FencingToken, inserted.ExpiresAtUtc\nINTO @out")
	indexOf(t, q, "ExpiresAtUtc = "+expiresFromNow)
}

// TestReleaseSQLFilters: the release decides under the name's lock whether
// the holding is the request's (owner, attempt, and token unless 0); only
// then does it end it, handing a live one on, deleting an expired one with
// the same filters.
func TestReleaseSQLFilters(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true).release
	indexOf(t, q, "SET XACT_ABORT ON;")
	match := indexOf(t, q, "SELECT @match = CASE WHEN "+holdingMatch+" AND (@token = 0 OR FencingToken = @token) THEN 1 ELSE 0 END,")
	lock := indexOf(t, q, "FROM [lease].[Leases] WITH (UPDLOCK, HOLDLOCK, ROWLOCK)\nWHERE "+keyMatch+";")
	now := indexOf(t, q, "SET @now = SYSDATETIMEOFFSET();")
	live := indexOf(t, q, "IF @match = 1 AND @holderExpires > @now")
	expired := indexOf(t, q, "ELSE IF @match = 1\nBEGIN")
	if !(match < lock && lock < now && now < live && live < expired) {
		t.Errorf("steps out of order: match %d lock %d now %d live %d expired %d", match, lock, now, live, expired)
	}
	indexOf(t, q[expired:], "DELETE FROM [lease].[Leases] WITH (ROWLOCK)\n    WHERE "+keyMatch+"\n      AND "+holdingMatch+"\n      AND (@token = 0 OR FencingToken = @token);")
	indexOf(t, q, "SELECT @released AS Released, @handedOwner AS HandedOwner, @handedAttempt AS HandedAttempt, @handedToken AS HandedToken, @handedPoll AS HandedPoll;")
}

func TestReplicaSQLReadsUncommitted(t *testing.T) {
	q := exclusiveQueries(mustNames(t, "lease", "Leases"), true).replica
	indexOf(t, q, "SELECT [RowVersion], OwnerInstanceId, FencingToken")
	indexOf(t, q, "FROM [lease].[Leases] WITH (READUNCOMMITTED)")
	indexOf(t, q, "WHERE "+keyMatch)
}

// TestSQLIsWellFormed is a light lint of every batch, since the SQL cannot
// run here: balanced parentheses, BEGIN/END and TRY/CATCH, no leftover
// template markers, and every @variable either declared or sent as a
// parameter (a typo would fail only on a real server).
func TestSQLIsWellFormed(t *testing.T) {
	params := map[string]bool{"@name": true, "@owner": true, "@attempt": true, "@token": true, "@ttlUs": true, "@metadata": true, "@sweep": true,
		"@entryTtlUs": true, "@pickupUs": true, "@poll": true, "@limit": true}
	for _, sweep := range []bool{true, false} {
		q := newQueries(mustNames(t, "le]a'se", "Le;ases--/*"), sweep)
		for name, text := range map[string]string{"acquire": q.acquire, "acquire shared": q.acquireShared, "renew": q.renew, "release": q.release,
			"replica": q.replica, "revoke": q.revoke, "holders": q.holders} {
			checkWellFormed(t, name, text, params)
		}
	}
}

func checkWellFormed(t *testing.T, name, text string, params map[string]bool) {
	t.Helper()
	// Remove quoted identifiers and literals first: they may hold anything.
	bare := regexp.MustCompile(`\[(?:[^\]]|\]\])*\]|N?'(?:[^']|'')*'`).ReplaceAllString(text, "X")
	if strings.Count(bare, "(") != strings.Count(bare, ")") {
		t.Errorf("%s: unbalanced parentheses", name)
	}
	if strings.ContainsAny(bare, "{}") || strings.Contains(bare, "%!") {
		t.Errorf("%s: leftover template or format marker:\n%s", name, text)
	}
	words := regexp.MustCompile(`\b(BEGIN|CASE|END)\b(?:\s+(TRY|CATCH|TRANSACTION))?`).FindAllStringSubmatch(bare, -1)
	depth := map[string]int{}
	for _, w := range words {
		kind := w[2]
		if kind == "TRANSACTION" {
			continue
		}
		if w[1] != "END" { // CASE ... END nests like BEGIN ... END
			depth[kind]++
		} else {
			depth[kind]--
		}
		if depth[kind] < 0 {
			t.Errorf("%s: END%s before BEGIN%s", name, kind, kind)
		}
	}
	for kind, d := range depth {
		if d != 0 {
			t.Errorf("%s: BEGIN/END %s unbalanced by %d", name, kind, d)
		}
	}
	declared := map[string]bool{}
	for _, m := range regexp.MustCompile(`DECLARE (@\w+)`).FindAllStringSubmatch(bare, -1) {
		declared[m[1]] = true
	}
	for _, v := range regexp.MustCompile(`@@?\w+`).FindAllString(bare, -1) {
		if strings.HasPrefix(v, "@@") {
			continue
		}
		if !declared[v] && !params[v] {
			t.Errorf("%s: %s is neither declared nor a parameter", name, v)
		}
	}
}

func TestQueriesQuoteHostileIdentifiers(t *testing.T) {
	n := mustNames(t, "s]; DROP TABLE x; --", "t'/*x*/")
	q := newQueries(n, true)
	wantTable := "[s]]; DROP TABLE x; --].[t'/*x*/]"
	wantSeq := "[s]]; DROP TABLE x; --].[t'/*x*/_FencingToken]"
	wantQueue := "[s]]; DROP TABLE x; --].[t'/*x*/_Queue]"
	wantHolds := "[s]]; DROP TABLE x; --].[t'/*x*/_Holds]"
	if n.tableQ != wantTable || n.sequenceQ != wantSeq || n.queueQ != wantQueue || n.holdsQ != wantHolds {
		t.Fatalf("quoted names = %s, %s, %s, %s", n.tableQ, n.sequenceQ, n.queueQ, n.holdsQ)
	}
	for name, text := range map[string]string{"acquire": q.acquire, "acquire shared": q.acquireShared, "renew": q.renew, "release": q.release,
		"replica": q.replica, "inspect": q.inspect, "holders": q.holders, "list": q.list, "revoke": q.revoke,
		"batch renew": renewBatchSQL(n, []int{0, 1}, []int64{1_000_000})} {
		// Once the quoted names are taken out, nothing of the hostile text
		// may remain in the SQL.
		rest := strings.NewReplacer(wantSeq, "SEQ", wantQueue, "QUEUE", wantHolds, "HOLDS", wantTable, "TBL").Replace(text)
		if strings.Contains(rest, "DROP") || strings.Contains(rest, "/*") || strings.Contains(rest, "--") {
			t.Errorf("%s: hostile identifier leaked out of its brackets:\n%s", name, text)
		}
	}
}
