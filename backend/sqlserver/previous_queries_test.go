package sqlserver

import (
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/backend"
)

// The batches of the previous version of this package (before names with
// several holders), word for word, for the tests that run them on a table
// of this version: such a process must never grant a name with several
// holders, nor end one.

// previousQueries builds the previous version's batches for n's tables, as
// its newQueries did.
func previousQueries(n objectNames) queries {
	fragments := strings.NewReplacer(
		"{handOnDeclarations}\n", previousHandOnDeclarations,
		"{handOn}\n", previousHandOnFragment,
		"{dropExpiredEntries}\n", previousDropExpiredEntries,
	)
	r := strings.NewReplacer(
		"{table}", n.tableQ,
		"{sequence}", n.sequenceQ,
		"{queue}", n.queueQ,
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
	build := func(template string) string { return r.Replace(fragments.Replace(template)) }
	return queries{
		acquire: strings.Replace(build(previousAcquireTemplate), "{sweep}\n", build(previousSweepTemplate), 1),
		renew:   build(previousRenewTemplate),
		release: build(previousReleaseTemplate),
		revoke:  build(previousRevokeTemplate),
		inspect: build(previousInspectTemplate),
	}
}

const previousSweepTemplate = `BEGIN TRY
    DELETE TOP (@sweep) FROM {table} WITH (READPAST, ROWLOCK)
    WHERE ExpiresAtUtc <= SYSDATETIMEOFFSET();
    DELETE TOP (@sweep) FROM {queue} WITH (READPAST, ROWLOCK)
    WHERE EntryExpiresAtUtc <= SYSDATETIMEOFFSET();
END TRY
BEGIN CATCH
    SET @swept = -1;
END CATCH;
`

const previousAcquireTemplate = `SET NOCOUNT ON;
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
        Metadata = @metadata
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
    IF @entryTtlUs > 0
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

SELECT Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, @queued AS Queued FROM @out;
`

const previousRenewTemplate = `SET NOCOUNT ON;
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

const previousReleaseTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

DECLARE @match BIT = 0;
DECLARE @holderToken BIGINT;
DECLARE @holderExpires DATETIMEOFFSET(7);
DECLARE @now DATETIMEOFFSET(7);
DECLARE @released BIGINT = 0;
{handOnDeclarations}

BEGIN TRANSACTION;

SELECT @match = CASE WHEN {holdingMatch} AND (@token = 0 OR FencingToken = @token) THEN 1 ELSE 0 END,
       @holderToken = FencingToken,
       @holderExpires = ExpiresAtUtc
FROM {table} WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE {keyMatch};

SET @now = SYSDATETIMEOFFSET();

DELETE FROM {queue} WITH (ROWLOCK)
WHERE {keyMatch}
  AND (EntryExpiresAtUtc <= @now OR ({holdingMatch}));

IF @match = 1 AND @holderExpires > @now
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

const previousRevokeTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

DECLARE @out TABLE (
    OwnerInstanceId NVARCHAR(400)     NOT NULL,
    FencingToken    BIGINT            NOT NULL,
    ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL,
    Metadata        NVARCHAR(4000)    NULL
);
DECLARE @holderToken BIGINT;
DECLARE @now DATETIMEOFFSET(7);
DECLARE @revoked INT = 0;
{handOnDeclarations}

BEGIN TRANSACTION;

SELECT @holderToken = FencingToken
FROM {table} WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE {keyMatch};

SET @now = SYSDATETIMEOFFSET();

INSERT INTO @out (OwnerInstanceId, FencingToken, ExpiresAtUtc, Metadata)
SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, Metadata
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

COMMIT TRANSACTION;

SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, COALESCE(Metadata, N'') FROM @out;
`

const previousInspectTemplate = `SET NOCOUNT ON;

DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();

SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, {remaining}, COALESCE(Metadata, N'')
FROM {table}
WHERE {keyMatch}
  AND ExpiresAtUtc > @now;
`

const previousDropExpiredEntries = `DELETE FROM {queue} WITH (ROWLOCK)
WHERE {keyMatch}
  AND EntryExpiresAtUtc <= @now;
`

const previousHandOnDeclarations = `DECLARE @headPosition BIGINT;
DECLARE @headPickupUs BIGINT;
DECLARE @headMetadata NVARCHAR(4000);
DECLARE @handedOwner NVARCHAR(400);
DECLARE @handedAttempt NVARCHAR(64);
DECLARE @handedToken BIGINT;
DECLARE @handedPoll BIGINT;
`

const previousHandOnFragment = `    SELECT TOP (1) @headPosition = Position,
           @handedOwner = OwnerInstanceId,
           @handedAttempt = AttemptId,
           @headPickupUs = PickupUs,
           @handedPoll = Poll,
           @headMetadata = Metadata
    FROM {queue}
    WHERE {keyMatch}
    ORDER BY Position;

    IF @headPosition IS NULL
    BEGIN
        DELETE FROM {table} WITH (ROWLOCK)
        WHERE {keyMatch} AND FencingToken = @holderToken;
    END
    ELSE
    BEGIN
        DELETE FROM {queue} WITH (ROWLOCK)
        WHERE {keyMatch} AND Position = @headPosition;
        SET @handedToken = NEXT VALUE FOR {sequence};
        UPDATE {table} WITH (ROWLOCK)
        SET OwnerInstanceId = @handedOwner,
            AttemptId = @handedAttempt,
            FencingToken = @handedToken,
            AcquiredAtUtc = @now,
            RenewedAtUtc = @now,
            ExpiresAtUtc = {pickupExpires},
            Metadata = @headMetadata
        WHERE {keyMatch} AND FencingToken = @holderToken;
    END;
`
