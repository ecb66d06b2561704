package sqlserver

// Names with several holders (backend/limit.go). A name acquired with Limit
// n > 1 keeps its holdings in the holds table, <table>_Holds, one row per
// holding, and one row of the lease table, its record: AttemptId '' (which
// no request can name), HolderLimit n, OwnerInstanceId recordOwner,
// FencingToken the latest token of the name, ExpiresAtUtc never before the
// end of a live holding of the name. Every statement that changes a name's
// holdings first takes the lock of its lease-table row (the record, or the
// key range where it would be), as the exclusive batches do, so a name's
// rules stay one atomic step; the renewal of a shared holding takes it too,
// before the holding's row, in the order the acquire takes them.
//
// The exclusive rows are untouched: HolderLimit stays 1 on them, and an
// exclusive acquire, renewal, release or revoke sends the same batch in one
// round trip as before. Those batches read the record as a live row of
// another kind: the acquire refuses it as live holdings of another limit,
// and the renewal, release and revoke turn to the holds table only for a
// name whose row is a record.
//
// A version of this package without the holds table reads the record as a
// live holding of recordOwner: it refuses the name, and no attempt of it can
// renew or release the record. Its revoke could end the record, which the
// keep trigger (keepTrigger) refuses.

// recordOwner is the owner of a name's record, as versions that do not know
// the record show it.
const recordOwner = "leasehold: several holders"

// isRecord is true for a lease-table row that is a name's record.
const isRecord = `AttemptId = N'' AND HolderLimit > 1`

// lockRecordFragment takes the lock of the name's record by writing it: an
// UPDATE locks the row on every engine, also on those that ignore UPDLOCK
// (Babelfish for PostgreSQL), and on PostgreSQL's READ COMMITTED every later
// statement of the transaction then sees what the previous holder of the
// lock committed. The clock is read after it.
const lockRecordFragment = `    UPDATE {table} WITH (ROWLOCK)
    SET HolderLimit = HolderLimit
    WHERE {keyMatch} AND {isRecord};
    SET @now = SYSDATETIMEOFFSET();
`

// holdingsOfName are the live holdings of @name at @now (OwnerInstanceId,
// FencingToken, ExpiresAtUtc, Metadata, HolderLimit): its exclusive row, or
// the holdings of its live record.
const holdingsOfName = `SELECT OwnerInstanceId, FencingToken, ExpiresAtUtc, COALESCE(Metadata, N'') AS Metadata, 1 AS HolderLimit
    FROM {table}
    WHERE {keyMatch} AND ExpiresAtUtc > @now AND NOT ({isRecord})
    UNION ALL
    SELECT h.OwnerInstanceId, h.FencingToken, h.ExpiresAtUtc, COALESCE(h.Metadata, N''), m.HolderLimit
    FROM {table} AS m
    INNER JOIN {holds} AS h ON h.LeaseName = m.LeaseName AND h.LeaseNameBytes = m.LeaseNameBytes
    WHERE m.LeaseName = @name AND m.LeaseNameBytes = DATALENGTH(@name)
      AND m.AttemptId = N'' AND m.HolderLimit > 1 AND m.ExpiresAtUtc > @now AND h.ExpiresAtUtc > @now`

// holdingsWhere are every live holding, as holdingsOfName, with the name.
const holdingsWhere = `SELECT LeaseName, LeaseNameBytes, OwnerInstanceId, FencingToken, ExpiresAtUtc, COALESCE(Metadata, N'') AS Metadata, 1 AS HolderLimit
    FROM {table}
    WHERE ExpiresAtUtc > @now AND NOT ({isRecord})
    UNION ALL
    SELECT h.LeaseName, h.LeaseNameBytes, h.OwnerInstanceId, h.FencingToken, h.ExpiresAtUtc, COALESCE(h.Metadata, N''), m.HolderLimit
    FROM {table} AS m
    INNER JOIN {holds} AS h ON h.LeaseName = m.LeaseName AND h.LeaseNameBytes = m.LeaseNameBytes
    WHERE m.AttemptId = N'' AND m.HolderLimit > 1 AND m.ExpiresAtUtc > @now AND h.ExpiresAtUtc > @now`

// recordRefusalFragment is the exclusive acquire's answer to a live
// record: refused for the limit, naming the holding that ends first.
const recordRefusalFragment = `ELSE IF @shared = 1
BEGIN
    SELECT TOP (1) @holder = OwnerInstanceId,
           @holderToken = FencingToken,
           @holderExpires = ExpiresAtUtc
    FROM {holds}
    WHERE {keyMatch} AND ExpiresAtUtc > @now
    ORDER BY ExpiresAtUtc, FencingToken;
    INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, HeldLimit)
    VALUES (5, @holder, @holderToken, @holderExpires, NULL, DATEDIFF_BIG(MICROSECOND, @now, @holderExpires), @heldLimit);
END
`

// sharedDeclarations are the variables of the shared release and revoke.
const sharedDeclarations = `DECLARE @gone TABLE (FencingToken BIGINT NOT NULL, ExpiresAtUtc DATETIMEOFFSET(7) NOT NULL);
DECLARE @lastExpires DATETIMEOFFSET(7);
`

// sharedHandOnFragment hands the slot a live holding of the name freed (its
// row deleted by the batch, under the record's lock) to the head live entry
// of the queue whose limit is the name's, @heldLimit: a new holding of that
// entry's owner and attempt, with a new token, expiring after its pickup
// window (as handOnFragment). Entries of another limit ahead of it, left
// from an earlier holding, are dropped. The record takes the new token.
const sharedHandOnFragment = `        SELECT TOP (1) @headPosition = Position,
               @handedOwner = OwnerInstanceId,
               @handedAttempt = AttemptId,
               @headPickupUs = PickupUs,
               @handedPoll = Poll,
               @headMetadata = Metadata
        FROM {queue}
        WHERE {keyMatch} AND HolderLimit = @heldLimit AND EntryExpiresAtUtc > @now
        ORDER BY Position;
        DELETE FROM {queue} WITH (ROWLOCK)
        WHERE {keyMatch} AND HolderLimit <> @heldLimit AND (@headPosition IS NULL OR Position < @headPosition);
        IF @headPosition IS NOT NULL
        BEGIN
            DELETE FROM {queue} WITH (ROWLOCK)
            WHERE {keyMatch} AND Position = @headPosition;
            SET @handedToken = NEXT VALUE FOR {sequence};
            DELETE FROM {holds} WITH (ROWLOCK)
            WHERE {keyMatch} AND AttemptId = @handedAttempt;
            INSERT INTO {holds} (LeaseName, LeaseNameBytes, AttemptId, OwnerInstanceId, FencingToken, AcquiredAtUtc, RenewedAtUtc, ExpiresAtUtc, Metadata)
            VALUES (@name, DATALENGTH(@name), @handedAttempt, @handedOwner, @handedToken, @now, @now, {pickupExpires}, @headMetadata);
            UPDATE {table} WITH (ROWLOCK)
            SET FencingToken = @handedToken
            WHERE {keyMatch} AND {isRecord};
        END;
`

// settleRecordFragment sets a live record's expiry to the end of the last
// live holding of the name, or to @now when none is left: the record then
// expires and the name is free. It is never deleted while live (see
// keepTrigger).
const settleRecordFragment = `        SET @lastExpires = (SELECT MAX(ExpiresAtUtc) FROM {holds} WHERE {keyMatch} AND ExpiresAtUtc > @now);
        UPDATE {table} WITH (ROWLOCK)
        SET ExpiresAtUtc = COALESCE(@lastExpires, @now)
        WHERE {keyMatch} AND {isRecord} AND ExpiresAtUtc > @now;
`

// sharedReleaseFragment is the release batch's part for a name whose row is
// a record: the holding (@owner, @attempt, @token or any token) is deleted
// under the record's lock; a live one hands its slot on.
const sharedReleaseFragment = `{lockRecord}
    DELETE FROM {holds} WITH (ROWLOCK)
    OUTPUT deleted.FencingToken, deleted.ExpiresAtUtc INTO @gone (FencingToken, ExpiresAtUtc)
    WHERE {keyMatch} AND {holdingMatch} AND (@token = 0 OR FencingToken = @token);
    IF EXISTS (SELECT 1 FROM @gone)
    BEGIN
        SET @released = 1;
        IF EXISTS (SELECT 1 FROM @gone WHERE ExpiresAtUtc > @now)
        BEGIN
{sharedHandOn}
        END;
{settleRecord}
    END;
`

// sharedRevokeFragment is the revoke batch's part for a name whose row is a
// record: it ends the live holding of token @token, or with @token 0 the
// one that ends first, and hands its slot on.
const sharedRevokeFragment = `{lockRecord}
    INSERT INTO @out (OwnerInstanceId, FencingToken, ExpiresAtUtc, Metadata, HolderLimit)
    SELECT TOP (1) OwnerInstanceId, FencingToken, ExpiresAtUtc, Metadata, @heldLimit
    FROM {holds}
    WHERE {keyMatch} AND ExpiresAtUtc > @now AND (@token = 0 OR FencingToken = @token)
    ORDER BY ExpiresAtUtc, FencingToken;
    SET @revoked = @@ROWCOUNT;

{dropExpiredEntries}
    IF @revoked > 0
    BEGIN
        DELETE FROM {holds} WITH (ROWLOCK)
        WHERE {keyMatch} AND FencingToken = (SELECT FencingToken FROM @out);
{sharedHandOn}
{settleRecord}
    END;
`

// sharedRenewFragment is the renewal of a shared holding, which runs only
// when the exclusive UPDATE matched no row and the name has a record: under
// the record's lock, the holding is extended as an exclusive one would be,
// and the record with it.
const sharedRenewFragment = `IF NOT EXISTS (SELECT 1 FROM @out)
   AND EXISTS (SELECT 1 FROM {table} WHERE {keyMatch} AND {isRecord})
BEGIN
    BEGIN TRANSACTION;
{lockRecord}
    UPDATE {holds} WITH (ROWLOCK)
    SET RenewedAtUtc = @now,
        ExpiresAtUtc = {expires}
    OUTPUT inserted.FencingToken, inserted.ExpiresAtUtc
    INTO @out (FencingToken, ExpiresAtUtc)
    WHERE {keyMatch}
      AND {holdingMatch}
      AND FencingToken = @token
      AND ExpiresAtUtc > @now;
    UPDATE {table} WITH (ROWLOCK)
    SET ExpiresAtUtc = (SELECT MAX(ExpiresAtUtc) FROM @out)
    WHERE {keyMatch} AND {isRecord} AND ExpiresAtUtc < (SELECT MAX(ExpiresAtUtc) FROM @out);
    COMMIT TRANSACTION;
END;
`

// handFreeFragment hands the free slots (@free) of a name with live
// holdings to the live entries of its limit queued ahead of the caller, in
// queue order, each as sharedHandOnFragment hands a released slot on: a
// holding of the entry's owner and attempt with a new token, expiring after
// its pickup window. A waiter polls at about half that window and finds
// its holding, as after a release; were the free slots left for the heads'
// own polls instead, the slots that releases hand on would reach them first
// on a busy name, and a slot freed by expiry could stay unused for good.
// Entries of another limit, or of an attempt that holds already, leave the
// queue on the way; the caller's own entry ends the walk and keeps its
// place. The record takes the last token and an expiry that covers the new
// holdings. With no live holding the heads' turns apply instead.
const handFreeFragment = `        IF @live = 1
        BEGIN
            SELECT @myPosition = Position FROM {queue} WHERE {keyMatch} AND {holdingMatch};
            WHILE @free > 0
            BEGIN
                SET @headPosition = NULL;
                SELECT TOP (1) @headPosition = Position,
                       @headLimit = HolderLimit,
                       @handedOwner = OwnerInstanceId,
                       @handedAttempt = AttemptId,
                       @headPickupUs = PickupUs,
                       @headMetadata = Metadata
                FROM {queue}
                WHERE {keyMatch} AND (@myPosition IS NULL OR Position < @myPosition)
                ORDER BY Position;
                IF @headPosition IS NULL
                    BREAK;
                DELETE FROM {queue} WITH (ROWLOCK)
                WHERE {keyMatch} AND Position = @headPosition;
                IF @headLimit = @limit
                   AND NOT EXISTS (SELECT 1 FROM {holds} WHERE {keyMatch} AND AttemptId = @handedAttempt)
                BEGIN
                    SET @handedToken = NEXT VALUE FOR {sequence};
                    SET @handedExpires = {pickupExpires};
                    INSERT INTO {holds} (LeaseName, LeaseNameBytes, AttemptId, OwnerInstanceId, FencingToken, AcquiredAtUtc, RenewedAtUtc, ExpiresAtUtc, Metadata)
                    VALUES (@name, DATALENGTH(@name), @handedAttempt, @handedOwner, @handedToken, @now, @now, @handedExpires, @headMetadata);
                    IF @lastHanded IS NULL OR @handedExpires > @lastHanded
                        SET @lastHanded = @handedExpires;
                    SET @free = @free - 1;
                END;
            END;
            IF @handedToken IS NOT NULL
            BEGIN
                UPDATE {table} WITH (ROWLOCK)
                SET FencingToken = @handedToken,
                    ExpiresAtUtc = CASE WHEN ExpiresAtUtc > @lastHanded THEN ExpiresAtUtc ELSE @lastHanded END
                WHERE {keyMatch} AND {isRecord};
            END;
        END;
`

// acquireSharedTemplate is the acquire batch of a request with Limit @limit
// above 1, one transaction under the name's lock (backend/limit.go):
//
//   - the lock: a write of the name's row (lockRecordFragment; with
//     HOLDLOCK, so that on SQL Server an absent row's key range is locked
//     too), then the read of the row, then the clock;
//   - a live exclusive row: refused, HeldLimit 1, nothing changed;
//   - the name's holdings: expired ones (all, when the row is not a live
//     record) are deleted; a live record of another limit: refused with
//     HeldLimit, naming the holding that ends first;
//   - the attempt's own live holding is refreshed (same token);
//   - every slot taken: refused, naming the holding that ends first;
//   - while the name has live holdings, the free slots are handed to the
//     live entries ahead of the caller (handFreeFragment); when that takes
//     every slot, refused as above, the new holdings included;
//   - else, with no live holding, the first (free slots) live entries of
//     the queue have their turn unless the caller is among them: a head's
//     turn starts when first found, one that let it pass leaves the queue,
//     and the caller is refused with the shortest turn left (outcome 4);
//   - else a new holding with a new token; the record is created, taken
//     over (an expired row of any kind) or moved on (the latest token and
//     expiry), and the other entries' turns start again at the next free
//     slot;
//
// and a refusal queues as the exclusive batch does, with the limit. A
// second session that inserts the record first makes the INSERT fail with a
// duplicate key (an engine without key-range locks), which acquireOnce
// answers by running the batch again.
const acquireSharedTemplate = `SET NOCOUNT ON;
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
DECLARE @rec TABLE (RowVer BINARY(8) NOT NULL);
DECLARE @found BIT = 0;
DECLARE @shared BIT = 0;
DECLARE @live BIT = 0;
DECLARE @heldLimit INT;
DECLARE @rowOwner NVARCHAR(400);
DECLARE @rowToken BIGINT;
DECLARE @rowExpires DATETIMEOFFSET(7);
DECLARE @now DATETIMEOFFSET(7);
DECLARE @expires DATETIMEOFFSET(7);
DECLARE @holdings BIGINT = 0;
DECLARE @holder NVARCHAR(400);
DECLARE @holderToken BIGINT;
DECLARE @holderExpires DATETIMEOFFSET(7);
DECLARE @free BIGINT;
DECLARE @myPosition BIGINT;
DECLARE @turnEnd DATETIMEOFFSET(7);
DECLARE @token BIGINT;
DECLARE @headPosition BIGINT;
DECLARE @headLimit INT;
DECLARE @headPickupUs BIGINT;
DECLARE @headMetadata NVARCHAR(4000);
DECLARE @handedOwner NVARCHAR(400);
DECLARE @handedAttempt NVARCHAR(64);
DECLARE @handedToken BIGINT;
DECLARE @handedExpires DATETIMEOFFSET(7);
DECLARE @lastHanded DATETIMEOFFSET(7);
DECLARE @granted BIT = 0;
DECLARE @refused BIT = 0;
DECLARE @renewed INT = 0;
DECLARE @queued BIT = 0;

BEGIN TRANSACTION;

UPDATE {table} WITH (ROWLOCK, HOLDLOCK)
SET HolderLimit = HolderLimit
WHERE {keyMatch};

SELECT @found = 1,
       @shared = CASE WHEN {isRecord} THEN 1 ELSE 0 END,
       @heldLimit = HolderLimit,
       @rowOwner = OwnerInstanceId,
       @rowToken = FencingToken,
       @rowExpires = ExpiresAtUtc
FROM {table} WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE {keyMatch};

SET @now = SYSDATETIMEOFFSET();
SET @expires = {expires};

{dropExpiredEntries}

IF @found = 1 AND @shared = 0 AND @rowExpires > @now
BEGIN
    INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, HeldLimit)
    VALUES (5, @rowOwner, @rowToken, @rowExpires, NULL, DATEDIFF_BIG(MICROSECOND, @now, @rowExpires), 1);
END
ELSE
BEGIN
    IF @found = 1 AND @shared = 1 AND @rowExpires > @now
        SET @live = 1;
    DELETE FROM {holds} WITH (ROWLOCK)
    WHERE {keyMatch} AND (ExpiresAtUtc <= @now OR @live = 0);
    SELECT @holdings = COUNT_BIG(*) FROM {holds} WHERE {keyMatch};
    IF @holdings = 0
        SET @live = 0;
    SELECT TOP (1) @holder = OwnerInstanceId,
           @holderToken = FencingToken,
           @holderExpires = ExpiresAtUtc
    FROM {holds}
    WHERE {keyMatch}
    ORDER BY ExpiresAtUtc, FencingToken;

    IF @live = 1 AND @heldLimit <> @limit
    BEGIN
        INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, HeldLimit)
        VALUES (5, @holder, @holderToken, @holderExpires, NULL, DATEDIFF_BIG(MICROSECOND, @now, @holderExpires), @heldLimit);
    END
    ELSE IF EXISTS (SELECT 1 FROM {holds} WHERE {keyMatch} AND {holdingMatch})
    BEGIN
        SET @granted = 1;
        UPDATE {holds} WITH (ROWLOCK)
        SET RenewedAtUtc = @now,
            ExpiresAtUtc = @expires,
            Metadata = @metadata
        OUTPUT 3, inserted.OwnerInstanceId, inserted.FencingToken, inserted.ExpiresAtUtc
        INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc)
        WHERE {keyMatch} AND {holdingMatch};
    END
    ELSE IF @holdings >= @limit
    BEGIN
        SET @refused = 1;
        INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs)
        VALUES (0, @holder, @holderToken, @holderExpires, NULL, DATEDIFF_BIG(MICROSECOND, @now, @holderExpires));
    END
    ELSE
    BEGIN
        SET @free = @limit - @holdings;
{handFree}
        IF @free = 0
        BEGIN
            SET @refused = 1;
            SELECT TOP (1) @holder = OwnerInstanceId,
                   @holderToken = FencingToken,
                   @holderExpires = ExpiresAtUtc
            FROM {holds}
            WHERE {keyMatch}
            ORDER BY ExpiresAtUtc, FencingToken;
            INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs)
            VALUES (0, @holder, @holderToken, @holderExpires, NULL, DATEDIFF_BIG(MICROSECOND, @now, @holderExpires));
        END
        ELSE
        BEGIN
            WHILE 1 = 1
            BEGIN
                SET @myPosition = NULL;
                SELECT @myPosition = Position FROM {queue} WHERE {keyMatch} AND {holdingMatch};
                IF (SELECT COUNT_BIG(*) FROM {queue}
                    WHERE {keyMatch} AND (@myPosition IS NULL OR Position < @myPosition)) < @free
                    BREAK;
                UPDATE {queue} WITH (ROWLOCK)
                SET TurnStartedAtUtc = @now
                WHERE {keyMatch} AND TurnStartedAtUtc IS NULL
                  AND Position IN (SELECT TOP (@free) Position FROM {queue} WHERE {keyMatch} ORDER BY Position);
                DELETE FROM {queue} WITH (ROWLOCK)
                WHERE {keyMatch} AND {entryTurnEnd} <= @now
                  AND Position IN (SELECT TOP (@free) Position FROM {queue} WHERE {keyMatch} ORDER BY Position);
                IF @@ROWCOUNT = 0
                BEGIN
                    SET @turnEnd = (SELECT MIN({entryTurnEnd}) FROM {queue}
                        WHERE {keyMatch} AND Position IN (SELECT TOP (@free) Position FROM {queue} WHERE {keyMatch} ORDER BY Position));
                    BREAK;
                END;
            END;
            IF @turnEnd IS NOT NULL
            BEGIN
                SET @refused = 1;
                INSERT INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs)
                VALUES (4, NULL, NULL, @turnEnd, NULL, DATEDIFF_BIG(MICROSECOND, @now, @turnEnd));
            END
            ELSE
            BEGIN
                SET @granted = 1;
                SET @token = NEXT VALUE FOR {sequence};
                DELETE FROM {holds} WITH (ROWLOCK)
                WHERE {keyMatch} AND AttemptId = @attempt;
                INSERT INTO {holds} (LeaseName, LeaseNameBytes, AttemptId, OwnerInstanceId, FencingToken, AcquiredAtUtc, RenewedAtUtc, ExpiresAtUtc, Metadata)
                OUTPUT 1, inserted.OwnerInstanceId, inserted.FencingToken, inserted.ExpiresAtUtc
                INTO @out (Outcome, Holder, FencingToken, ExpiresAtUtc)
                VALUES (@name, DATALENGTH(@name), @attempt, @owner, @token, @now, @now, @expires, @metadata);
                UPDATE {queue} WITH (ROWLOCK)
                SET TurnStartedAtUtc = NULL
                WHERE {keyMatch} AND TurnStartedAtUtc IS NOT NULL;
            END;
        END;
    END;
END;

IF @granted = 1
BEGIN
    IF @found = 0
    BEGIN
        INSERT INTO {table} (LeaseName, LeaseNameBytes, OwnerInstanceId, AttemptId, FencingToken, AcquiredAtUtc, RenewedAtUtc, ExpiresAtUtc, Metadata, HolderLimit)
        OUTPUT inserted.[RowVersion] INTO @rec (RowVer)
        VALUES (@name, DATALENGTH(@name), {recordOwner}, N'', @token, @now, @now, @expires, NULL, @limit);
    END
    ELSE
    BEGIN
        UPDATE {table} WITH (ROWLOCK)
        SET OwnerInstanceId = {recordOwner},
            AttemptId = N'',
            FencingToken = COALESCE(@token, FencingToken),
            AcquiredAtUtc = CASE WHEN @live = 1 THEN AcquiredAtUtc ELSE @now END,
            RenewedAtUtc = @now,
            ExpiresAtUtc = CASE WHEN @live = 1 AND ExpiresAtUtc > @expires THEN ExpiresAtUtc ELSE @expires END,
            Metadata = NULL,
            HolderLimit = @limit
        OUTPUT inserted.[RowVersion] INTO @rec (RowVer)
        WHERE {keyMatch};
    END;
    UPDATE @out SET RowVer = (SELECT RowVer FROM @rec);
    DELETE FROM {queue} WITH (ROWLOCK)
    WHERE {keyMatch} AND {holdingMatch};
END
ELSE
BEGIN
    IF @entryTtlUs > 0 AND @refused = 1
    BEGIN
        UPDATE {queue} WITH (ROWLOCK)
        SET EntryExpiresAtUtc = {entryExpires},
            PickupUs = @pickupUs,
            Poll = @poll,
            Metadata = @metadata,
            HolderLimit = @limit
        WHERE {keyMatch} AND {holdingMatch};
        SET @renewed = @@ROWCOUNT;
        IF @renewed = 0
           AND NOT EXISTS (SELECT 1 FROM {queue} WHERE {keyMatch} AND AttemptId = @attempt)
           AND (SELECT COUNT_BIG(*) FROM {queue} WHERE {keyMatch}) < {maxQueue}
        BEGIN
            INSERT INTO {queue} (LeaseName, LeaseNameBytes, AttemptId, OwnerInstanceId, Metadata, PickupUs, Poll, EnqueuedAtUtc, EntryExpiresAtUtc, HolderLimit)
            VALUES (@name, DATALENGTH(@name), @attempt, @owner, @metadata, @pickupUs, @poll, @now, {entryExpires}, @limit);
        END;
    END;
    IF EXISTS (SELECT 1 FROM {queue} WHERE {keyMatch} AND {holdingMatch})
        SET @queued = 1;
END;

COMMIT TRANSACTION;

SELECT Outcome, Holder, FencingToken, ExpiresAtUtc, RowVer, RemainingUs, @queued AS Queued, HeldLimit FROM @out;
`
