package postgres

import (
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// The statements of the version before names with several holders
// (queries.go of that version, renamed): what a process still running it
// sends. previousHoldingColumns is that version's holdingColumns
// (inspect.go).

const previousHoldingColumns = `l.lease_name, l.owner_instance_id, l.fencing_token, l.expires_at, l.metadata,
       GREATEST(0, extract(epoch FROM l.expires_at - c.now) * 1000000)::bigint`

// queries holds the statements of one table, built once by New. Every value is
// a parameter; only the quoted table and sequence names are spliced in.
type previousQueries struct {
	lock    string
	acquire string
	renew   string
	// lockDeferred and renewDeferred are lock and renew committing without
	// waiting for the WAL flush, for the transactions of a Batch that a
	// later synchronous commit of the same Batch makes durable.
	lockDeferred  string
	renewDeferred string
	// renewBatch renews many holdings in one UPDATE joined to the requests
	// (parallel arrays; $6 carries each request's index back).
	renewBatch string
	release    string
	sweep      string
	inspect    string
	list       string
	revoke     string
	seq        string // the quoted sequence name, sent as a regclass parameter
}

// syncCommit makes the transaction it runs in commit synchronously whatever
// the server, database or role default: with synchronous_commit = off, a
// crash may lose a grant (and its sequence advance) that was already
// acknowledged, and the next grant would repeat its token. is_local = true
// scopes it to the current transaction (the implicit one of a single
// statement included); the commit record is written, and waited for, with
// the value in force at commit. remote_apply is kept: it is stronger than on.
// It costs no round trip: it is part of a statement that is sent anyway.
const previousSyncCommit = `set_config('synchronous_commit',
    CASE current_setting('synchronous_commit') WHEN 'remote_apply' THEN 'remote_apply' ELSE 'on' END, true)`

// deferredCommit makes the transaction it runs in commit without waiting
// for the WAL flush. Batch uses it for every transaction but the last of a
// round trip: the WAL is written in order, so the last one's synchronous
// commit flushes (and, with remote_apply, waits for the standby to apply) the
// earlier commit records too, and Batch answers none of them before that.
const previousDeferredCommit = `set_config('synchronous_commit', 'off', true)`

func previousBuildQueries(n names) previousQueries {
	q := previousBuildQueriesWith(n, previousSyncCommit)
	d := previousBuildQueriesWith(n, previousDeferredCommit)
	q.lockDeferred, q.renewDeferred = d.lock, d.renew
	return q
}

// buildQueriesWith builds the statements with commitMode as the set_config
// that chooses how their transaction commits.
func previousBuildQueriesWith(n names, commitMode string) previousQueries {
	return previousQueries{
		// The first statement of the acquire and release transactions.
		lock: "SELECT pg_advisory_xact_lock($1), " + commitMode,

		// The clock is read once, after the lock (this statement runs after
		// the lock statement), and every part reads the rows as they were
		// before it (one snapshot); the lock keeps other writers of this
		// name out, but for the sweep, which deletes only what has expired
		// by then, and Renew, which extends only a live holding.
		//
		// cur is the live holding, head the live head of the waiter queue
		// and turn that head's turn: a row only when the name is free and
		// the head is another attempt (ends: the turn's end, from its
		// recorded start or, when none is recorded yet, from now). The name
		// is granted (granted) when the live holding is this attempt's own,
		// or when it is free and no turn runs; nextval is drawn there too,
		// after the lock, so grants of one name get increasing tokens (a
		// refresh of the same attempt's live row keeps its token and the
		// drawn value is simply skipped). When the upsert's WHERE rejects
		// the update, the holding in the way is reported, with the time it
		// has left measured on the same clock reading; when a turn runs,
		// the turn is reported instead (no holder, its time left). A refused
		// attempt that will wait ($7) marks the holding (marked), so that
		// its release is announced; a new grant starts unmarked, a refresh
		// keeps the mark.
		//
		// The queue: dequeued drops expired entries and, once the caller is
		// granted, its own entry and a head whose turn has passed; started
		// records the start of a turn; enqueued queues a refused waiting
		// attempt that asked for it ($8 > 0), once: an attempt already
		// queued keeps its place (an expired entry of it rejoins at the
		// tail) and its entry's expiry, poll and the rest are renewed; a
		// queue with backend.MaxQueueEntries live entries of other attempts
		// takes no new one. Each entry is touched by at most one of the
		// three, as one statement must (the caller's own by dequeued only
		// when granted, by enqueued only when not; the head by started only
		// while its turn runs, when it is neither expired nor removed).
		acquire: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
cur AS MATERIALIZED (
    SELECT l.owner_instance_id, l.attempt FROM %[1]s l, clock c
    WHERE l.lease_name = $1 AND l.expires_at > c.now
),
head AS MATERIALIZED (
    SELECT q.attempt, q.turn_started_at, q.pickup_us FROM %[2]s q, clock c
    WHERE q.lease_name = $1 AND q.expires_at > c.now
    ORDER BY q.place LIMIT 1
),
turn AS MATERIALIZED (
    SELECT h.attempt, h.turn_started_at IS NULL AS starts,
           coalesce(h.turn_started_at, c.now) + h.pickup_us * interval '1 microsecond' AS ends
    FROM head h, clock c
    WHERE h.attempt <> $3 AND NOT EXISTS (SELECT 1 FROM cur)
),
granted AS (
    INSERT INTO %[1]s AS l (lease_name, owner_instance_id, attempt, fencing_token, acquired_at, renewed_at, expires_at, metadata)
    SELECT $1, $2, $3, nextval($6::regclass), c.now, c.now, c.now + $4::bigint * interval '1 microsecond', $5 FROM clock c
    WHERE CASE WHEN EXISTS (SELECT 1 FROM cur)
               THEN EXISTS (SELECT 1 FROM cur WHERE attempt = $3 AND owner_instance_id = $2)
               ELSE NOT EXISTS (SELECT 1 FROM turn t WHERE t.ends > c.now) END
    ON CONFLICT (lease_name) DO UPDATE SET
        owner_instance_id = excluded.owner_instance_id,
        attempt       = excluded.attempt,
        fencing_token = CASE WHEN l.expires_at > excluded.renewed_at THEN l.fencing_token ELSE excluded.fencing_token END,
        acquired_at   = CASE WHEN l.expires_at > excluded.renewed_at THEN l.acquired_at ELSE excluded.acquired_at END,
        renewed_at = excluded.renewed_at,
        expires_at = excluded.expires_at,
        metadata   = excluded.metadata,
        waited     = CASE WHEN l.expires_at > excluded.renewed_at THEN l.waited ELSE false END
    WHERE l.expires_at <= excluded.renewed_at
       OR (l.attempt = excluded.attempt AND l.owner_instance_id = excluded.owner_instance_id)
    RETURNING l.fencing_token, l.expires_at
),
marked AS (
    UPDATE %[1]s AS m SET waited = true
    FROM clock c
    WHERE $7::boolean AND m.lease_name = $1 AND NOT m.waited AND m.expires_at > c.now
      AND NOT EXISTS (SELECT 1 FROM granted)
),
dequeued AS (
    DELETE FROM %[2]s q USING clock c
    WHERE q.lease_name = $1 AND CASE WHEN q.attempt = $3 THEN EXISTS (SELECT 1 FROM granted)
        ELSE q.expires_at <= c.now
          OR (EXISTS (SELECT 1 FROM granted) AND q.attempt IN (SELECT t.attempt FROM turn t WHERE t.ends <= c.now)) END
),
started AS (
    UPDATE %[2]s q SET turn_started_at = c.now
    FROM turn t, clock c
    WHERE t.starts AND q.lease_name = $1 AND q.attempt = t.attempt
),
enqueued AS (
    INSERT INTO %[2]s AS q (lease_name, attempt, owner_instance_id, metadata, notify_address, notify_channel, pickup_us, poll, expires_at)
    SELECT $1, $3, $2, $5, $10, $11, $9, $12, c.now + $8::bigint * interval '1 microsecond' FROM clock c
    WHERE $7::boolean AND $8::bigint > 0 AND NOT EXISTS (SELECT 1 FROM granted)
      AND (SELECT count(*) FROM (SELECT FROM %[2]s x
           WHERE x.lease_name = $1 AND x.attempt <> $3 AND x.expires_at > c.now LIMIT %[3]d) n) < %[3]d
    ON CONFLICT (lease_name, attempt) DO UPDATE SET
        place           = CASE WHEN q.expires_at > (SELECT now FROM clock) THEN q.place ELSE excluded.place END,
        turn_started_at = CASE WHEN q.expires_at > (SELECT now FROM clock) THEN q.turn_started_at END,
        metadata        = excluded.metadata,
        notify_address  = excluded.notify_address,
        notify_channel  = excluded.notify_channel,
        pickup_us       = excluded.pickup_us,
        poll            = excluded.poll,
        expires_at      = excluded.expires_at
    WHERE q.owner_instance_id = excluded.owner_instance_id
    RETURNING true
),
queued AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM enqueued)
        OR EXISTS (SELECT 1 FROM %[2]s q, clock c
                   WHERE q.lease_name = $1 AND q.attempt = $3 AND q.owner_instance_id = $2 AND q.expires_at > c.now) AS queued
)
SELECT true, g.fencing_token, g.expires_at, ''::text, 0::bigint, false FROM granted g
UNION ALL
SELECT false, l.fencing_token, l.expires_at, l.owner_instance_id,
       GREATEST(0, extract(epoch FROM l.expires_at - c.now) * 1000000)::bigint, w.queued
FROM %[1]s l, clock c, queued w
WHERE l.lease_name = $1 AND NOT EXISTS (SELECT 1 FROM granted)
  AND NOT EXISTS (SELECT 1 FROM turn t WHERE t.ends > c.now)
UNION ALL
SELECT false, 0::bigint, t.ends, ''::text,
       GREATEST(0, extract(epoch FROM t.ends - c.now) * 1000000)::bigint, w.queued
FROM turn t, clock c, queued w
WHERE t.ends > c.now AND NOT EXISTS (SELECT 1 FROM granted)`, n.table, n.queue, backend.MaxQueueEntries),

		// c.sync is tested so that the set_config is surely evaluated
		// before any row is updated.
		renew: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now, %[2]s AS sync)
UPDATE %[1]s AS l
SET renewed_at = c.now, expires_at = c.now + $5::bigint * interval '1 microsecond'
FROM clock c
WHERE l.lease_name = $1 AND l.owner_instance_id = $2 AND l.attempt = $3 AND l.fencing_token = $4
  AND l.expires_at > c.now AND c.sync <> ''
RETURNING l.expires_at`, n.table, commitMode),

		renewBatch: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now, %[2]s AS sync)
UPDATE %[1]s AS l
SET renewed_at = c.now, expires_at = c.now + r.ttl_us * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::int[]) AS r(name, owner, attempt, token, ttl_us, ord), clock c
WHERE l.lease_name = r.name AND l.owner_instance_id = r.owner AND l.attempt = r.attempt AND l.fencing_token = r.token
  AND l.expires_at > c.now AND c.sync <> ''
RETURNING r.ord, l.expires_at`, n.table, commitMode),

		// Release and revoke hand on (handOn): after the lock statement of
		// the same transaction, a live holding deleted (gone) is replaced
		// by a holding of the live head of the queue (head), when there is
		// one. Release also removes the entry of its own (owner, attempt):
		// a waiter leaving the queue. Token 0 means whatever token this
		// attempt's holding has: only that attempt's row can match. The
		// notifications are sent at commit, so a waiter never wakes before
		// the row is gone or handed on.
		release: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
head AS MATERIALIZED (
    SELECT %[3]s FROM %[2]s q, clock c
    WHERE q.lease_name = $1 AND q.expires_at > c.now AND q.attempt <> $3
    ORDER BY q.place LIMIT 1
),
gone AS (
    DELETE FROM %[1]s l USING clock c
    WHERE l.lease_name = $1 AND l.owner_instance_id = $2 AND l.attempt = $3 AND ($4::bigint = 0 OR l.fencing_token = $4::bigint)
    RETURNING l.lease_name, l.waited, l.expires_at > c.now AS live
),
%[4]s
SELECT count(*) FROM notices`, n.table, n.queue, previousHeadColumns,
			previousHandOn(n, "$6", "$5", "q.attempt = $3 AND q.owner_instance_id = $2")),

		// SKIP LOCKED: never wait on, or deadlock with, rows being granted
		// or queued. Sweeps keep the server's commit mode: a lost sweep only
		// brings back rows that are expired anyway.
		sweep: fmt.Sprintf(`WITH leases AS (
    DELETE FROM %[1]s WHERE lease_name IN (
        SELECT lease_name FROM %[1]s WHERE expires_at <= clock_timestamp()
        ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING 1
),
entries AS (
    DELETE FROM %[2]s WHERE (lease_name, attempt) IN (
        SELECT lease_name, attempt FROM %[2]s WHERE expires_at <= clock_timestamp()
        ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING 1
)
SELECT (SELECT count(*) FROM leases), (SELECT count(*) FROM entries)`, n.table, n.queue),

		inspect: fmt.Sprintf(`SELECT %[2]s
FROM %[1]s l, (SELECT clock_timestamp() AS now) c
WHERE l.lease_name = $1 AND l.expires_at > c.now`, n.table, previousHoldingColumns),

		// A primary-key range: [$1, $2) when $3, else [$1, ...), after $4
		// (the previous page's last key) when it is not NULL. Reads lock
		// nothing.
		list: fmt.Sprintf(`SELECT %[2]s
FROM %[1]s l, (SELECT clock_timestamp() AS now) c
WHERE l.lease_name >= $1::text AND (NOT $3::boolean OR l.lease_name < $2::text)
  AND ($4::text IS NULL OR l.lease_name > $4::text)
  AND l.expires_at > c.now
ORDER BY l.lease_name
LIMIT $5`, n.table, previousHoldingColumns),

		// Like release, after the lock statement of the same transaction,
		// filtered by the token only (an operator's act, not a holder's),
		// and handing on the same way; it reports the holding it removed.
		// The head is never an entry of the holding's own attempt.
		revoke: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
head AS MATERIALIZED (
    SELECT %[3]s FROM %[2]s q, clock c
    WHERE q.lease_name = $1 AND q.expires_at > c.now
      AND NOT EXISTS (SELECT 1 FROM %[1]s o WHERE o.lease_name = $1 AND o.attempt = q.attempt)
    ORDER BY q.place LIMIT 1
),
gone AS (
    DELETE FROM %[1]s l USING clock c
    WHERE l.lease_name = $1 AND l.expires_at > c.now AND ($2::bigint = 0 OR l.fencing_token = $2::bigint)
    RETURNING l.lease_name, l.owner_instance_id, l.fencing_token, l.expires_at, l.metadata, l.waited, true AS live
),
%[4]s
SELECT %[5]s FROM gone l, clock c, (SELECT count(*) FROM notices) n`, n.table, n.queue, previousHeadColumns,
			previousHandOn(n, "$4", "$3", "false"), previousHoldingColumns),

		seq: n.sequence,
	}
}

// headColumns are the columns of the queue entry (q) that handOn needs.
const previousHeadColumns = `q.attempt, q.owner_instance_id, q.metadata, q.pickup_us, q.poll, q.notify_address, q.notify_channel`

// handOn is the part that release and revoke share, after their CTEs clock,
// head (the live head entry, previousHeadColumns, or no row) and gone (the holding
// deleted: lease_name, waited, live). The live holding gone is replaced by a
// holding of head (handed): a new token from the sequence (parameter seq)
// drawn after the name's lock, expiring after the entry's pickup window, with
// the entry's metadata and the mark (waited) of the holding it replaces, so
// that waiters who poll still hear its release. dequeued drops the expired
// entries, the entry handed the name and the entries matching leaving.
// notices sends the hand-off to the entry's channel (Backend.handOffChannel)
// with the payload WatchHandOffs documents, or, when nothing was handed on, announces a marked holding's release on the
// release channel (parameter channel), as before the queue: only the
// releases a waiter marked, since a NOTIFY costs every listener a wake-up.
// The statement must read every row of notices.
func previousHandOn(n names, seq, channel, leaving string) string {
	return fmt.Sprintf(`handed AS (
    INSERT INTO %[1]s (lease_name, owner_instance_id, attempt, fencing_token, acquired_at, renewed_at, expires_at, metadata, waited)
    SELECT g.lease_name, h.owner_instance_id, h.attempt, nextval(%[3]s::regclass), c.now, c.now,
           c.now + h.pickup_us * interval '1 microsecond', h.metadata, g.waited
    FROM gone g, head h, clock c WHERE g.live
    RETURNING lease_name, attempt, fencing_token
),
dequeued AS (
    DELETE FROM %[2]s q USING clock c
    WHERE q.lease_name = $1 AND (q.expires_at <= c.now OR q.attempt IN (SELECT attempt FROM handed) OR (%[5]s))
),
notices AS (
    SELECT pg_notify(h.notify_channel, '1 ' || x.fencing_token || ' ' || h.poll || ' ' || h.notify_address || ' ' || h.attempt
           || ' ' || octet_length(h.owner_instance_id) || ' ' || h.owner_instance_id || ' ' || x.lease_name)
    FROM handed x, head h WHERE h.notify_channel <> ''
    UNION ALL
    SELECT pg_notify(%[4]s, g.lease_name) FROM gone g WHERE g.waited AND NOT EXISTS (SELECT 1 FROM handed)
)`, n.table, n.queue, seq, channel, leaving)
}
