package sqlserver

import "strings"

// Outcomes of the acquire batch, in its Outcome column.
const (
	outcomeBusy     = 0 // another holding is live
	outcomeInserted = 1 // no row: inserted with a new token
	outcomeTakeover = 2 // expired row: taken over with a new token
	outcomeRefresh  = 3 // the live row of this very attempt: refreshed, same token
)

// errDelayedDurabilityNumber is the error number the acquire batch raises
// when the database forces delayed durability (see durabilityGuard).
const errDelayedDurabilityNumber = 50101

// queries holds the SQL text of one table, built once by New. Every value is
// a parameter (@name, @owner, @attempt, @token, @ttlUs, @metadata, @sweep);
// only the bracket-quoted object names are spliced into the text.
type queries struct {
	acquire string
	renew   string
	release string
	replica string
	inspect string
	list    string
	revoke  string
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

func newQueries(n objectNames, sweep bool) queries {
	r := strings.NewReplacer(
		"{table}", n.tableQ,
		"{sequence}", n.sequenceQ,
		"{keyMatch}", keyMatch,
		"{holdingMatch}", holdingMatch,
		"{expires}", expiresFromNow,
		"{durabilityGuard}", durabilityGuard,
		"{remaining}", remainingUs,
	)
	sweepSQL := ""
	if sweep {
		sweepSQL = r.Replace(sweepTemplate)
	}
	return queries{
		acquire: strings.Replace(r.Replace(acquireTemplate), "{sweep}\n", sweepSQL, 1),
		renew:   r.Replace(renewTemplate),
		release: r.Replace(releaseTemplate),
		replica: r.Replace(replicaTemplate),
		inspect: r.Replace(inspectTemplate),
		list:    r.Replace(listTemplate),
		revoke:  r.Replace(revokeTemplate),
	}
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

// sweepTemplate deletes up to @sweep expired rows of any name, as its own
// autocommit statement before the acquire transaction so that it never holds
// serializable locks. READPAST skips rows that other sessions have locked;
// the predicate is re-checked on each locked row, so a row refreshed meanwhile
// is not deleted. The sweep is best effort: a failure (for example being
// chosen as a deadlock victim) must not fail the acquire.
const sweepTemplate = `BEGIN TRY
    DELETE TOP (@sweep) FROM {table} WITH (READPAST, ROWLOCK)
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
    RemainingUs  BIGINT            NULL
);
DECLARE @found BIT = 0;
DECLARE @mine BIT = 0;
DECLARE @holder NVARCHAR(400);
DECLARE @holderToken BIGINT;
DECLARE @holderExpires DATETIMEOFFSET(7);
DECLARE @now DATETIMEOFFSET(7);
DECLARE @token BIGINT;

BEGIN TRANSACTION;

SELECT @found = 1,
       @mine = CASE WHEN {holdingMatch} THEN 1 ELSE 0 END,
       @holder = OwnerInstanceId,
       @holderToken = FencingToken,
       @holderExpires = ExpiresAtUtc
FROM {table} WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE {keyMatch};

SET @now = SYSDATETIMEOFFSET();

IF @found = 0
BEGIN
    SET @token = NEXT VALUE FOR {sequence};
    INSERT INTO {table} (LeaseName, LeaseNameBytes, OwnerInstanceId, AttemptId, FencingToken, AcquiredAtUtc, RenewedAtUtc, ExpiresAtUtc, Metadata)
    OUTPUT 1, inserted.OwnerInstanceId, inserted.FencingToken, inserted.ExpiresAtUtc, inserted.[RowVersion]
    INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer)
    VALUES (@name, DATALENGTH(@name), @owner, @attempt, @token, @now, @now, {expires}, @metadata);
END
ELSE IF @holderExpires <= @now
BEGIN
    SET @token = NEXT VALUE FOR {sequence};
    UPDATE {table} WITH (ROWLOCK)
    SET OwnerInstanceId = @owner,
        AttemptId = @attempt,
        FencingToken = @token,
        AcquiredAtUtc = @now,
        RenewedAtUtc = @now,
        ExpiresAtUtc = {expires},
        Metadata = @metadata
    OUTPUT 2, inserted.OwnerInstanceId, inserted.FencingToken, inserted.ExpiresAtUtc, inserted.[RowVersion]
    INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer)
    WHERE {keyMatch};
END
ELSE IF @mine = 1
BEGIN
    UPDATE {table} WITH (ROWLOCK)
    SET RenewedAtUtc = @now,
        ExpiresAtUtc = {expires},
        Metadata = @metadata
    OUTPUT 3, inserted.OwnerInstanceId, inserted.FencingToken, inserted.ExpiresAtUtc, inserted.[RowVersion]
    INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer)
    WHERE {keyMatch};
END
ELSE
BEGIN
    INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs)
    VALUES (0, @holder, @holderToken, @holderExpires, NULL, DATEDIFF_BIG(MICROSECOND, @now, @holderExpires));
END;

COMMIT TRANSACTION;

SELECT Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs FROM @out;
`

// renewTemplate extends the live row of the holding (@name, @owner,
// @attempt, @token). No row comes back when that holding has been released,
// has expired or was replaced.
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

SELECT FencingToken, ExpiresAtUtc FROM @out;
`

// releaseTemplate deletes the row of the holding (@name, @owner, @attempt,
// @token); @token 0 matches whatever token that attempt's holding has (the
// engine's clean-up after an acquire whose answer it never saw), never
// another attempt's row. It returns the number of rows deleted, for the log.
const releaseTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;

DELETE FROM {table} WITH (ROWLOCK)
WHERE {keyMatch}
  AND {holdingMatch}
  AND (@token = 0 OR FencingToken = @token);

SELECT CAST(@@ROWCOUNT AS BIGINT);
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

// inspectTemplate reads the live holding of @name, whoever holds it.
const inspectTemplate = `SET NOCOUNT ON;

DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();

SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, COALESCE(Metadata, N'')
FROM {table}
WHERE {keyMatch}
  AND ExpiresAtUtc > @now;
`

// listTemplate reads the live holdings whose name starts with @prefix, in
// name order. The prefix is compared as UTF-16 bytes, so case, trailing
// spaces and control characters count exactly as in keyMatch; LEFT counts
// UTF-16 units under the non-SC binary collation, so it cuts the name at the
// prefix's length. A range on the primary key cannot express this (the
// padding rule sorts "ab\t" before "ab"), so this reads the clustered index
// in order; it is an operator's view, not a hot path. An empty @prefix
// matches every name.
const listTemplate = `SET NOCOUNT ON;

DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();

SELECT LeaseName, OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, COALESCE(Metadata, N'')
FROM {table}
WHERE ExpiresAtUtc > @now
  AND DATALENGTH(LeaseName) >= DATALENGTH(@prefix)
  AND CAST(LEFT(LeaseName, DATALENGTH(@prefix) / 2) AS VARBINARY(800)) = CAST(@prefix AS VARBINARY(800))
ORDER BY LeaseName, LeaseNameBytes;
`

// revokeTemplate deletes the live holding of @name when its token is @token
// (0: whichever holding is live) and returns what it deleted. The token is
// never drawn again from the sequence, so the holder is fenced: its next
// renewal finds no row.
const revokeTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;

DECLARE @out TABLE (
    OwnerInstanceId NVARCHAR(400)     NOT NULL,
    FencingToken    BIGINT            NOT NULL,
    ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL,
    Metadata        NVARCHAR(4000)    NULL
);
DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();

DELETE FROM {table} WITH (ROWLOCK)
OUTPUT deleted.OwnerInstanceId, deleted.FencingToken, deleted.ExpiresAtUtc, deleted.Metadata
INTO @out (OwnerInstanceId, FencingToken, ExpiresAtUtc, Metadata)
WHERE {keyMatch}
  AND ExpiresAtUtc > @now
  AND (@token = 0 OR FencingToken = @token);

SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, COALESCE(Metadata, N'') FROM @out;
`
