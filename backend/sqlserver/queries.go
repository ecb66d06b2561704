package sqlserver

import (
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/backend"
)

// Outcomes of the acquire batch, in its Outcome column.
const (
	outcomeBusy     = 0 // another holding is live
	outcomeInserted = 1 // no row: inserted with a new token
	outcomeTakeover = 2 // expired row: taken over with a new token
	outcomeRefresh  = 3 // the live row of this very attempt: refreshed, same token
	outcomeTurn     = 4 // no live holding, but the queue's head (another attempt) has the turn
	outcomeLimit    = 5 // live holdings of another limit (HeldLimit): nothing changed
)

// errDelayedDurabilityNumber is the error number the acquire batch raises
// when the database forces delayed durability (see durabilityGuard).
const errDelayedDurabilityNumber = 50101

// queries holds the SQL text of one table, built once by New. Every value is
// a parameter (@name, @owner, @attempt, @token, @ttlUs, @metadata,
// @entryTtlUs, @pickupUs, @poll, @sweep); only the bracket-quoted object
// names and the constant backend.MaxQueueEntries are spliced into the text.
type queries struct {
	acquire       string
	acquireShared string // Limit above 1 (shared.go)
	holders       string
	renew         string
	release       string
	replica       string
	inspect       string
	list          string
	revoke        string
}

// keyMatch selects the row of @name. SQL Server pads the shorter string with
// spaces before comparing, even under a binary collation, so the length in
// bytes is compared too; LeaseNameBytes is the second primary key column so
// that this is an index seek.
const keyMatch = `LeaseName = @name AND LeaseNameBytes = DATALENGTH(@name)`

// holdingMatch is true for the row made by the attempt @attempt of @owner,
// exactly (see keyMatch: the owner's length is compared too). The columns'
// binary collation takes precedence over the parameters' default collation.
// An attempt is printable ASCII without spaces (backend.CheckAttempt), so the
// padding rule cannot make two attempts equal and no DATALENGTH is needed.
const holdingMatch = `OwnerInstanceId = @owner AND DATALENGTH(OwnerInstanceId) = DATALENGTH(@owner) AND AttemptId = @attempt`

// expiresFromNow computes @now + @ttlUs microseconds. DATEADD takes an INT,
// which holds only 35 minutes of microseconds, so whole seconds and the rest
// are added in two steps; both fit an INT for every TTL up to MaxTTL.
const expiresFromNow = `DATEADD(MICROSECOND, CAST(@ttlUs % 1000000 AS INT), DATEADD(SECOND, CAST(@ttlUs / 1000000 AS INT), @now))`

// addMicros computes base + us microseconds, as expiresFromNow does, for
// other operands (us a BIGINT of at most MaxTTL in microseconds).
func addMicros(us, base string) string {
	return "DATEADD(MICROSECOND, CAST(" + us + " % 1000000 AS INT), DATEADD(SECOND, CAST(" + us + " / 1000000 AS INT), " + base + "))"
}

func newQueries(n objectNames, sweep bool) queries {
	build := builder(n)
	sweepSQL := ""
	if sweep {
		sweepSQL = build(sweepTemplate)
	}
	return queries{
		acquire:       strings.Replace(build(acquireTemplate), "{sweep}\n", sweepSQL, 1),
		acquireShared: strings.Replace(build(acquireSharedTemplate), "{sweep}\n", sweepSQL, 1),
		holders:       build(holdersTemplate),
		renew:         build(renewTemplate),
		release:       build(releaseTemplate),
		replica:       build(replicaTemplate),
		inspect:       build(inspectTemplate),
		list:          build(listTemplate),
		revoke:        build(revokeTemplate),
	}
}

// builder returns the function that makes a template's SQL for n's table.
func builder(n objectNames) func(template string) string {
	// The fragments go in first, so that their own markers are replaced too.
	fragments := strings.NewReplacer(
		"{handOnDeclarations}\n", handOnDeclarations,
		"{sharedDeclarations}\n", sharedDeclarations,
		"{handOn}\n", handOnFragment,
		"{dropExpiredEntries}\n", dropExpiredEntries,
		"{sharedRenew}\n", sharedRenewFragment,
		"{sharedRelease}\n", sharedReleaseFragment,
		"{sharedRevoke}\n", sharedRevokeFragment,
		"{recordRefusal}\n", recordRefusalFragment,
		"{handFree}\n", handFreeFragment,
	)
	// The shared fragments contain fragments of their own.
	inner := strings.NewReplacer(
		"{sharedHandOn}\n", sharedHandOnFragment,
		"{settleRecord}\n", settleRecordFragment,
		"{lockRecord}\n", lockRecordFragment,
		"{dropExpiredEntries}\n", dropExpiredEntries,
	)
	r := strings.NewReplacer(
		"{table}", n.tableQ,
		"{sequence}", n.sequenceQ,
		"{queue}", n.queueQ,
		"{holds}", n.holdsQ,
		"{recordOwner}", quoteLiteral(recordOwner),
		"{isRecord}", isRecord,
		"{entryTurnEnd}", addMicros("PickupUs", "TurnStartedAtUtc"),
		"{keyMatch}", keyMatch,
		"{holdingMatch}", holdingMatch,
		"{expires}", expiresFromNow,
		"{entryExpires}", addMicros("@entryTtlUs", "@now"),
		"{turnEnd}", addMicros("@headPickupUs", "@turnStart"),
		"{pickupExpires}", addMicros("@headPickupUs", "@now"),
		"{maxQueue}", strconv.Itoa(backend.MaxQueueEntries),
		"{durabilityGuard}", durabilityGuard,
		"{remaining}", remainingUs,
	)
	return func(template string) string { return r.Replace(inner.Replace(fragments.Replace(template))) }
}

// durabilityGuard stops an acquire on a database with DELAYED_DURABILITY =
// FORCED. There every commit returns before its log records reach the disk
// (COMMIT WITH (DELAYED_DURABILITY = OFF) is ignored), so a crash can lose an
// acknowledged grant and the sequence's advance with it: the next grant would
// repeat a token already handed out. EnsureSchema refuses such a database
// too; this check also covers tables deployed with CreateScript and a setting
// changed while the backend runs. The current database is always visible in
// sys.databases, whatever the caller's permissions.
const durabilityGuard = `IF EXISTS (SELECT 1 FROM sys.databases WHERE database_id = DB_ID() AND delayed_durability = 2)
    THROW 50101, N'leasehold: the database has DELAYED_DURABILITY = FORCED: a crash could lose granted leases and repeat fencing tokens', 1;
`

// sweepTemplate deletes up to @sweep expired rows of any name, and up to
// @sweep expired queue entries (their waiters are gone: no poll renewed
// them), each as its own autocommit statement before the acquire transaction
// so that it never holds serializable locks. READPAST skips rows that other
// sessions have locked; the predicate is re-checked on each locked row, so a
// row refreshed meanwhile is not deleted. Deleting an expired entry without
// the name's lock is safe: every reader treats an expired entry as absent,
// and so an expired holding of a name with several holders (no renewal
// extends an expired holding).
// The sweep is best effort: a failure (for example being chosen as a
// deadlock victim) must not fail the acquire.
const sweepTemplate = `BEGIN TRY
    DELETE TOP (@sweep) FROM {table} WITH (READPAST, ROWLOCK)
    WHERE ExpiresAtUtc <= SYSDATETIMEOFFSET();
    DELETE TOP (@sweep) FROM {queue} WITH (READPAST, ROWLOCK)
    WHERE EntryExpiresAtUtc <= SYSDATETIMEOFFSET();
    DELETE TOP (@sweep) FROM {holds} WITH (READPAST, ROWLOCK)
    WHERE ExpiresAtUtc <= SYSDATETIMEOFFSET();
END TRY
BEGIN CATCH
    SET @swept = -1;
END CATCH;
`

// acquireTemplate is the whole acquire batch. XACT_ABORT ON makes any error,
// and a client cancel (attention), roll the transaction back, so a cancelled
// batch leaves no transaction open. The name is locked first (UPDLOCK,
// HOLDLOCK takes a key-range lock when the row is absent, so two callers
// cannot both insert); the clock is read once, after the lock. The token is
// drawn into a variable: NEXT VALUE FOR is not allowed in MERGE, CASE or
// OUTPUT, and must only be drawn after the lock so that tokens follow the
// order of grants. Only the live row of this very attempt (same owner, same
// AttemptId) is refreshed; any other live row, the same owner's included, is
// reported with its token and its remaining time measured on the same clock
// read (DATEDIFF_BIG: microseconds of a year overflow an INT). Results go
// through OUTPUT ... INTO a table variable and are selected after COMMIT.
//
// The waiter queue (backend/queue.go) is read and written only under the
// name's lock, in the same transaction, so every queue rule is one atomic
// step with the grant or refusal it goes with. Expired entries are dropped
// first. When the name is free, a head entry of another attempt has the
// turn: its start is recorded on the entry by the first acquire that finds
// the name free with that head, and until the turn's end (start + the
// head's pickup) the caller is refused (outcome 4, no holder, the turn's
// time left); after it the head is removed and the caller granted as usual.
// A granted caller's own entry is removed. A refused caller with
// @entryTtlUs > 0 is queued: its entry (same owner and attempt) keeps its
// place and is renewed, or a new one goes at the tail unless the name has
// MaxQueueEntries live entries. Queued says whether the caller has an entry
// when the batch ends.
//
// A live row that is a name's record (shared.go) is refused as live
// holdings of another limit (outcome 5, HeldLimit the record's), naming the
// holding that ends first; nothing is queued then. An expired record is
// taken over like any expired row, its HolderLimit set back to 1.
const acquireTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

{durabilityGuard}
DECLARE @swept INT = 0;
{sweep}
DECLARE @out TABLE (
    Outcome      TINYINT           NOT NULL,
    Holder       NVARCHAR(400)     NULL,
    FencingToken BIGINT            NULL,
    ExpiresAtUtc DATETIMEOFFSET(7) NULL,
    RowVer       BINARY(8)         NULL,
    RemainingUs  BIGINT            NULL,
    HeldLimit    INT               NULL
);
DECLARE @found BIT = 0;
DECLARE @mine BIT = 0;
DECLARE @shared BIT = 0;
DECLARE @heldLimit INT;
DECLARE @holder NVARCHAR(400);
DECLARE @holderToken BIGINT;
DECLARE @holderExpires DATETIMEOFFSET(7);
DECLARE @now DATETIMEOFFSET(7);
DECLARE @token BIGINT;
DECLARE @granted BIT = 0;
DECLARE @headPosition BIGINT;
DECLARE @headMine BIT = 0;
DECLARE @headPickupUs BIGINT;
DECLARE @turnStart DATETIMEOFFSET(7);
DECLARE @turnEnd DATETIMEOFFSET(7);
DECLARE @renewed INT = 0;
DECLARE @queued BIT = 0;

BEGIN TRANSACTION;

SELECT @found = 1,
       @mine = CASE WHEN {holdingMatch} THEN 1 ELSE 0 END,
       @shared = CASE WHEN {isRecord} THEN 1 ELSE 0 END,
       @heldLimit = HolderLimit,
       @holder = OwnerInstanceId,
       @holderToken = FencingToken,
       @holderExpires = ExpiresAtUtc
FROM {table} WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE {keyMatch};

SET @now = SYSDATETIMEOFFSET();

{dropExpiredEntries}

IF @found = 0 OR @holderExpires <= @now
BEGIN
    SELECT TOP (1) @headPosition = Position,
           @headMine = CASE WHEN {holdingMatch} THEN 1 ELSE 0 END,
           @headPickupUs = PickupUs,
           @turnStart = TurnStartedAtUtc
    FROM {queue}
    WHERE {keyMatch}
    ORDER BY Position;

    IF @headPosition IS NOT NULL AND @headMine = 0
    BEGIN
        IF @turnStart IS NULL
        BEGIN
            SET @turnStart = @now;
            UPDATE {queue} WITH (ROWLOCK)
            SET TurnStartedAtUtc = @now
            WHERE {keyMatch} AND Position = @headPosition;
        END;
        SET @turnEnd = {turnEnd};
        IF @turnEnd <= @now
        BEGIN
            DELETE FROM {queue} WITH (ROWLOCK)
            WHERE {keyMatch} AND Position = @headPosition;
            SET @turnEnd = NULL;
        END;
    END;
END;

IF @turnEnd IS NOT NULL
BEGIN
    INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs)
    VALUES (4, NULL, NULL, @turnEnd, NULL, DATEDIFF_BIG(MICROSECOND, @now, @turnEnd));
END
ELSE IF @found = 0
BEGIN
    SET @granted = 1;
    SET @token = NEXT VALUE FOR {sequence};
    INSERT INTO {table} (LeaseName, LeaseNameBytes, OwnerInstanceId, AttemptId, FencingToken, AcquiredAtUtc, RenewedAtUtc, ExpiresAtUtc, Metadata)
    OUTPUT 1, inserted.OwnerInstanceId, inserted.FencingToken, inserted.ExpiresAtUtc, inserted.[RowVersion]
    INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer)
    VALUES (@name, DATALENGTH(@name), @owner, @attempt, @token, @now, @now, {expires}, @metadata);
END
ELSE IF @holderExpires <= @now
BEGIN
    SET @granted = 1;
    SET @token = NEXT VALUE FOR {sequence};
    UPDATE {table} WITH (ROWLOCK)
    SET OwnerInstanceId = @owner,
        AttemptId = @attempt,
        FencingToken = @token,
        AcquiredAtUtc = @now,
        RenewedAtUtc = @now,
        ExpiresAtUtc = {expires},
        Metadata = @metadata,
        HolderLimit = 1
    OUTPUT 2, inserted.OwnerInstanceId, inserted.FencingToken, inserted.ExpiresAtUtc, inserted.[RowVersion]
    INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer)
    WHERE {keyMatch};
END
ELSE IF @mine = 1
BEGIN
    SET @granted = 1;
    UPDATE {table} WITH (ROWLOCK)
    SET RenewedAtUtc = @now,
        ExpiresAtUtc = {expires},
        Metadata = @metadata
    OUTPUT 3, inserted.OwnerInstanceId, inserted.FencingToken, inserted.ExpiresAtUtc, inserted.[RowVersion]
    INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer)
    WHERE {keyMatch};
END
{recordRefusal}
ELSE
BEGIN
    INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs)
    VALUES (0, @holder, @holderToken, @holderExpires, NULL, DATEDIFF_BIG(MICROSECOND, @now, @holderExpires));
END;

IF @granted = 1
BEGIN
    DELETE FROM {queue} WITH (ROWLOCK)
    WHERE {keyMatch} AND {holdingMatch};
END
ELSE
BEGIN
    IF @entryTtlUs > 0 AND @shared = 0
    BEGIN
        UPDATE {queue} WITH (ROWLOCK)
        SET EntryExpiresAtUtc = {entryExpires},
            PickupUs = @pickupUs,
            Poll = @poll,
            Metadata = @metadata
        WHERE {keyMatch} AND {holdingMatch};
        SET @renewed = @@ROWCOUNT;
        IF @renewed = 0
           AND NOT EXISTS (SELECT 1 FROM {queue} WHERE {keyMatch} AND AttemptId = @attempt)
           AND (SELECT COUNT_BIG(*) FROM {queue} WHERE {keyMatch}) < {maxQueue}
        BEGIN
            INSERT INTO {queue} (LeaseName, LeaseNameBytes, AttemptId, OwnerInstanceId, Metadata, PickupUs, Poll, EnqueuedAtUtc, EntryExpiresAtUtc)
            VALUES (@name, DATALENGTH(@name), @attempt, @owner, @metadata, @pickupUs, @poll, @now, {entryExpires});
        END;
    END;
    IF EXISTS (SELECT 1 FROM {queue} WHERE {keyMatch} AND {holdingMatch})
        SET @queued = 1;
END;

COMMIT TRANSACTION;

SELECT Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, @queued AS Queued, HeldLimit FROM @out;
`

// renewTemplate extends the live row of the holding (@name, @owner,
// @attempt, @token). No row comes back when that holding has been released,
// has expired or was replaced. Only when no exclusive row matched, and the
// name has a record, is the holding looked for among the name's holdings
// (sharedRenewFragment).
const renewTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;

DECLARE @out TABLE (FencingToken BIGINT NOT NULL, ExpiresAtUtc DATETIMEOFFSET(7) NOT NULL);
DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();

UPDATE {table} WITH (ROWLOCK)
SET RenewedAtUtc = @now,
    ExpiresAtUtc = {expires}
OUTPUT inserted.FencingToken, inserted.ExpiresAtUtc
INTO @out (FencingToken, ExpiresAtUtc)
WHERE {keyMatch}
  AND {holdingMatch}
  AND FencingToken = @token
  AND ExpiresAtUtc > @now;

{sharedRenew}
SELECT FencingToken, ExpiresAtUtc FROM @out;
`

// releaseTemplate ends the holding (@name, @owner, @attempt, @token);
// @token 0 matches whatever token that attempt's holding has (the engine's
// clean-up after an acquire whose answer it never saw), never another
// attempt's row. It locks the name as the acquire does and, in the same
// transaction, drops expired queue entries and the entry of (@owner,
// @attempt) (a waiter leaving the queue, or a holder that was queued), then
// ends the holding when it matches: a live one is handed on (handOnFragment),
// an expired one is deleted and hands nothing on (the name is free by
// expiry, and the head's turn applies). It returns whether a holding
// matched and whom it was handed to, for the log. A name's record never
// matches (no attempt is empty): a holding of a name with several holders
// is released by sharedReleaseFragment instead.
const releaseTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

DECLARE @match BIT = 0;
DECLARE @holderToken BIGINT;
DECLARE @holderExpires DATETIMEOFFSET(7);
DECLARE @now DATETIMEOFFSET(7);
DECLARE @released BIGINT = 0;
DECLARE @shared BIT = 0;
DECLARE @heldLimit INT;
{handOnDeclarations}
{sharedDeclarations}

BEGIN TRANSACTION;

SELECT @match = CASE WHEN {holdingMatch} AND (@token = 0 OR FencingToken = @token) THEN 1 ELSE 0 END,
       @holderToken = FencingToken,
       @holderExpires = ExpiresAtUtc,
       @shared = CASE WHEN {isRecord} THEN 1 ELSE 0 END,
       @heldLimit = HolderLimit
FROM {table} WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE {keyMatch};

SET @now = SYSDATETIMEOFFSET();

DELETE FROM {queue} WITH (ROWLOCK)
WHERE {keyMatch}
  AND (EntryExpiresAtUtc <= @now OR ({holdingMatch}));

IF @shared = 1
BEGIN
{sharedRelease}
END
ELSE IF @match = 1 AND @holderExpires > @now
BEGIN
    SET @released = 1;
{handOn}
END
ELSE IF @match = 1
BEGIN
    SET @released = 1;
    DELETE FROM {table} WITH (ROWLOCK)
    WHERE {keyMatch}
      AND {holdingMatch}
      AND (@token = 0 OR FencingToken = @token);
END;

COMMIT TRANSACTION;

SELECT @released AS Released, @handedOwner AS HandedOwner, @handedAttempt AS HandedAttempt, @handedToken AS HandedToken, @handedPoll AS HandedPoll;
`

// replicaTemplate reads the row of @name on a read replica, without waiting
// for locks.
const replicaTemplate = `SELECT [RowVersion], OwnerInstanceId, FencingToken
FROM {table} WITH (READUNCOMMITTED)
WHERE {keyMatch};
`

// remainingUs is a holding's time left in microseconds, measured against the
// batch's one clock read @now. DATEDIFF_BIG: microseconds of a year overflow
// an INT.
const remainingUs = `DATEDIFF_BIG(MICROSECOND, @now, ExpiresAtUtc)`

// inspectTemplate reads the live holding of @name, whoever holds it: the
// exclusive row, or of a name with several holders the holding that ends
// first (holdingsOf).
const inspectTemplate = `SET NOCOUNT ON;

DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();

SELECT TOP (1) OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, Metadata, HolderLimit
FROM (` + holdingsOfName + `) AS l
ORDER BY ExpiresAtUtc, FencingToken;
`

// holdersTemplate reads every live holding of @name, by token.
const holdersTemplate = `SET NOCOUNT ON;

DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();

SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, Metadata, HolderLimit
FROM (` + holdingsOfName + `) AS l
ORDER BY FencingToken;
`

// listTemplate reads the live holdings whose name starts with @prefix, in
// name order. The prefix is compared as bytes (the names' UTF-16 code units,
// as varbinary): character functions would measure the prefix by the
// database's default collation, which under a supplementary-character (_SC
// or _UTF8) collation counts a surrogate pair as one character where the
// column's binary collation counts two, and would ignore trailing spaces.
// The name must be at least as long as the prefix, so that both sides of
// the comparison have the same length (varbinary comparisons ignore
// trailing zero bytes). A range on the primary key cannot express this (the
// padding rule sorts "ab\t" before "ab"), so this reads the clustered index
// in order; it is an operator's view, not a hot path. An empty @prefix
// matches every name. A name with several holders lists each holding, by
// token.
const listTemplate = `SET NOCOUNT ON;

DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();

SELECT LeaseName, OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, Metadata, HolderLimit
FROM (` + holdingsWhere + `) AS l
WHERE LeaseNameBytes >= DATALENGTH(@prefix)
  AND SUBSTRING(CAST(LeaseName AS VARBINARY(800)), 1, DATALENGTH(@prefix)) = CAST(@prefix AS VARBINARY(MAX))
ORDER BY LeaseName, LeaseNameBytes, FencingToken;
`

// revokeTemplate ends the live holding of @name when its token is @token
// (0: whichever holding is live), handing the name on as a release does
// (handOnFragment), and returns what it ended. The token is never drawn
// again from the sequence, so the holder is fenced: its next renewal finds
// no row of its token. Of a name with several holders it ends one holding
// (sharedRevokeFragment).
const revokeTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

DECLARE @out TABLE (
    OwnerInstanceId NVARCHAR(400)     NOT NULL,
    FencingToken    BIGINT            NOT NULL,
    ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL,
    Metadata        NVARCHAR(4000)    NULL,
    HolderLimit     INT               NOT NULL
);
DECLARE @holderToken BIGINT;
DECLARE @now DATETIMEOFFSET(7);
DECLARE @revoked INT = 0;
DECLARE @shared BIT = 0;
DECLARE @heldLimit INT;
{handOnDeclarations}
{sharedDeclarations}

BEGIN TRANSACTION;

SELECT @holderToken = FencingToken,
       @shared = CASE WHEN {isRecord} THEN 1 ELSE 0 END,
       @heldLimit = HolderLimit
FROM {table} WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE {keyMatch};

SET @now = SYSDATETIMEOFFSET();

IF @shared = 1
BEGIN
{sharedRevoke}
END
ELSE
BEGIN
    INSERT INTO @out (OwnerInstanceId, FencingToken, ExpiresAtUtc, Metadata, HolderLimit)
    SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, Metadata, 1
    FROM {table}
    WHERE {keyMatch}
      AND ExpiresAtUtc > @now
      AND (@token = 0 OR FencingToken = @token);
    SET @revoked = @@ROWCOUNT;

{dropExpiredEntries}
    IF @revoked > 0
    BEGIN
{handOn}
    END;
END;

COMMIT TRANSACTION;

SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, COALESCE(Metadata, N''), HolderLimit FROM @out;
`
