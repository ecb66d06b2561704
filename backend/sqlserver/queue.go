package sqlserver

import "math"

// The waiter queue (backend/queue.go) lives in a second table, <table>_Queue,
// one row per queued attempt of a name, in arrival order (Position). It is
// read and written only by the acquire, release and revoke batches, each in
// the transaction that holds the name's lock on the lease table (UPDLOCK,
// HOLDLOCK on its row, or on the key range where it would be), so each queue
// rule is one atomic step with the grant, refusal or release it belongs to.
// The only other writer is the sweep, which deletes expired entries, which
// every batch treats as absent anyway.
//
// SQL Server has no cheap notification, so Info declares no HandOffNotices:
// a waiter handed the name learns it when it next
// polls (an Acquire of its attempt, which finds its own live holding and
// refreshes it to the full TTL), or by Renew with the token. Notify is
// therefore not stored.

// dropExpiredEntries deletes the name's expired queue entries, measured on
// the batch's clock read @now, under the name's lock: from then on the
// batch sees only live entries.
const dropExpiredEntries = `DELETE FROM {queue} WITH (ROWLOCK)
WHERE {keyMatch}
  AND EntryExpiresAtUtc <= @now;
`

// handOnDeclarations are the variables of handOnFragment; the @handed ones
// are selected at the end of the release batch (NULL: handed to no one).
const handOnDeclarations = `DECLARE @headPosition BIGINT;
DECLARE @headPickupUs BIGINT;
DECLARE @headMetadata NVARCHAR(4000);
DECLARE @handedOwner NVARCHAR(400);
DECLARE @handedAttempt NVARCHAR(64);
DECLARE @handedToken BIGINT;
DECLARE @handedPoll BIGINT;
`

// handOnFragment ends the live holding whose token is @holderToken (its row
// locked by the batch, the clock read into @now, expired entries dropped)
// and hands the name to the head of its queue: the head entry is removed
// and becomes the holding (its owner, attempt and metadata) with a new
// token drawn after the lock from the same sequence as the acquire's,
// expiring after the entry's pickup window rather than a TTL. With no
// entry, the row is deleted and the name is free. Both statements name the
// ended holding's token, so they cannot touch another row. Entries of
// another limit (waiters of an earlier holding with several holders) are
// passed over.
const handOnFragment = `    SELECT TOP (1) @headPosition = Position,
           @handedOwner = OwnerInstanceId,
           @handedAttempt = AttemptId,
           @headPickupUs = PickupUs,
           @handedPoll = Poll,
           @headMetadata = Metadata
    FROM {queue}
    WHERE {keyMatch} AND HolderLimit = 1
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

// pollParam is QueueRequest.Poll as a BIGINT parameter. The engine counts
// polls from 1, so the cap is never reached in practice; it keeps a huge
// value from wrapping to a negative number.
func pollParam(poll uint64) int64 {
	return int64(min(poll, math.MaxInt64))
}
