package postgres

import (
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/backend"
)

// queries holds the statements of one table, built once by New. Every value is
// a parameter; only the quoted table and sequence names are spliced in.
type queries struct {
	lock    string
	acquire string
	// acquireShared calls the acquire function of the names with several
	// holders (shared.go), after the lock statement, as acquire runs.
	acquireShared string
	renew         string
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
	holders    string
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
const syncCommit = `set_config('synchronous_commit',
    CASE current_setting('synchronous_commit') WHEN 'remote_apply' THEN 'remote_apply' ELSE 'on' END, true)`

// deferredCommit makes the transaction it runs in commit without waiting
// for the WAL flush. Batch uses it for every transaction but the last of a
// round trip: the WAL is written in order, so the last one's synchronous
// commit flushes (and, with remote_apply, waits for the standby to apply) the
// earlier commit records too, and Batch answers none of them before that.
const deferredCommit = `set_config('synchronous_commit', 'off', true)`

func buildQueries(n names) queries {
	q := buildQueriesWith(n, syncCommit)
	d := buildQueriesWith(n, deferredCommit)
	q.lockDeferred, q.renewDeferred = d.lock, d.renew
	return q
}

// buildQueriesWith builds the statements with commitMode as the set_config
// that chooses how their transaction commits.
func buildQueriesWith(n names, commitMode string) queries {
	return queries{
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
    SELECT l.owner_instance_id, l.attempt, l.attempt = '' AND l.holder_limit > 1 AS shared FROM %[1]s l, clock c
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
      AND NOT EXISTS (SELECT 1 FROM granted) AND NOT EXISTS (SELECT 1 FROM cur WHERE shared)
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
    WHERE $7::boolean AND $8::bigint > 0 AND NOT EXISTS (SELECT 1 FROM granted) AND NOT EXISTS (SELECT 1 FROM cur WHERE shared)
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
SELECT true, g.fencing_token, g.expires_at, ''::text, 0::bigint, false, 0 FROM granted g
UNION ALL
SELECT false, coalesce(f.fencing_token, l.fencing_token), coalesce(f.expires_at, l.expires_at), coalesce(f.owner_instance_id, l.owner_instance_id),
       GREATEST(0, extract(epoch FROM coalesce(f.expires_at, l.expires_at) - c.now) * 1000000)::bigint, w.queued,
       CASE WHEN l.attempt = '' AND l.holder_limit > 1 AND l.expires_at > c.now THEN l.holder_limit ELSE 0 END
FROM %[1]s l CROSS JOIN clock c CROSS JOIN queued w
LEFT JOIN LATERAL (
    SELECT h.owner_instance_id, h.fencing_token, h.expires_at FROM %[4]s h
    WHERE l.attempt = '' AND l.holder_limit > 1 AND h.lease_name = $1 AND h.expires_at > c.now
    ORDER BY h.expires_at, h.fencing_token LIMIT 1
) f ON true
WHERE l.lease_name = $1 AND NOT EXISTS (SELECT 1 FROM granted)
  AND NOT EXISTS (SELECT 1 FROM turn t WHERE t.ends > c.now)
UNION ALL
SELECT false, 0::bigint, t.ends, ''::text,
       GREATEST(0, extract(epoch FROM t.ends - c.now) * 1000000)::bigint, w.queued, 0
FROM turn t, clock c, queued w
WHERE t.ends > c.now AND NOT EXISTS (SELECT 1 FROM granted)`, n.table, n.queue, backend.MaxQueueEntries, n.holds),

		// c.sync is tested so that the set_config is surely evaluated
		// before any row is updated.
		//
		// A holding of a name with several holders is a row of the holds
		// table, renewed by the renew function (sharedRenewBody), called
		// only for a name that has a record (a name has one row of the
		// lease table: exclusive or record).
		renew: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now, %[2]s AS sync),
exclusive AS (
    UPDATE %[1]s AS l
    SET renewed_at = c.now, expires_at = c.now + $5::bigint * interval '1 microsecond'
    FROM clock c
    WHERE l.lease_name = $1 AND l.owner_instance_id = $2 AND l.attempt = $3 AND l.fencing_token = $4
      AND l.expires_at > c.now AND c.sync <> ''
    RETURNING l.expires_at
),
shared AS MATERIALIZED (
    SELECT %[3]s($1, $2, $3, $4::bigint, $5::bigint) AS expires_at FROM %[1]s m, clock c
    WHERE m.lease_name = $1 AND m.attempt = '' AND m.holder_limit > 1 AND c.sync <> ''
)
SELECT expires_at FROM exclusive UNION ALL SELECT expires_at FROM shared WHERE expires_at IS NOT NULL`, n.table, commitMode, n.renew),

		renewBatch: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now, %[2]s AS sync),
req AS MATERIALIZED (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::int[]) AS r(name, owner, attempt, token, ttl_us, ord)
),
exclusive AS (
    UPDATE %[1]s AS l
    SET renewed_at = c.now, expires_at = c.now + r.ttl_us * interval '1 microsecond'
    FROM req r, clock c
    WHERE l.lease_name = r.name AND l.owner_instance_id = r.owner AND l.attempt = r.attempt AND l.fencing_token = r.token
      AND l.expires_at > c.now AND c.sync <> ''
    RETURNING r.ord, l.expires_at
),
shared AS MATERIALIZED (
    SELECT r.ord, %[3]s(r.name, r.owner, r.attempt, r.token, r.ttl_us) AS expires_at
    FROM req r JOIN %[1]s m ON m.lease_name = r.name AND m.attempt = '' AND m.holder_limit > 1, clock c
    WHERE c.sync <> ''
)
SELECT ord, expires_at FROM exclusive UNION ALL SELECT ord, expires_at FROM shared WHERE expires_at IS NOT NULL`, n.table, commitMode, n.renew),

		// Release and revoke hand on (handOn): after the lock statement of
		// the same transaction, a live holding deleted (gone) is replaced
		// by a holding of the live head of the queue (head), when there is
		// one. Release also removes the entry of its own (owner, attempt):
		// a waiter leaving the queue. Token 0 means whatever token this
		// attempt's holding has: only that attempt's row can match. The
		// notifications are sent at commit, so a waiter never wakes before
		// the row is gone or handed on.
		//
		// A holding of a name with several holders (a row of the holds
		// table) is released by the release function (sharedReleaseBody),
		// called only for a name that has a record: an exclusive release
		// pays one probe of the lease table's primary key for it. A name
		// has one row of the lease table, so the exclusive part finds
		// nothing of a shared name's but the entries it drops (expired, or
		// the attempt's own), which the function leaves alone.
		release: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
head AS MATERIALIZED (
    SELECT %[3]s FROM %[2]s q, clock c
    WHERE q.lease_name = $1 AND q.expires_at > c.now AND q.attempt <> $3 AND q.holder_limit = 1
    ORDER BY q.place LIMIT 1
),
gone AS (
    DELETE FROM %[1]s l USING clock c
    WHERE l.lease_name = $1 AND l.owner_instance_id = $2 AND l.attempt = $3 AND ($4::bigint = 0 OR l.fencing_token = $4::bigint)
    RETURNING l.lease_name, l.waited, l.expires_at > c.now AS live
),
%[4]s,
shared AS MATERIALIZED (
    SELECT %[5]s($1, $2, $3, $4::bigint, $5) FROM %[1]s m WHERE m.lease_name = $1 AND m.attempt = '' AND m.holder_limit > 1
)
SELECT (SELECT count(*) FROM notices) + (SELECT count(*) FROM shared)`, n.table, n.queue, headColumns,
			handOn(n, "$6", "$5", "q.attempt = $3 AND q.owner_instance_id = $2"), n.release),

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
),
holds AS (
    DELETE FROM %[3]s WHERE (lease_name, attempt) IN (
        SELECT lease_name, attempt FROM %[3]s WHERE expires_at <= clock_timestamp()
        ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      AND expires_at <= clock_timestamp()
    RETURNING 1
)
SELECT (SELECT count(*) FROM leases) + (SELECT count(*) FROM holds), (SELECT count(*) FROM entries)`, n.table, n.queue, n.holds),

		// A name with several holders answers the holding that ends
		// first (holdings, below); holders answers every one.
		inspect: fmt.Sprintf(`WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now)
SELECT %[2]s FROM (%[3]s) l, c
ORDER BY l.expires_at, l.fencing_token LIMIT 1`, n.table, holdingColumns, holdings(n, "= $1")),

		holders: fmt.Sprintf(`WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now)
SELECT %[2]s FROM (%[3]s) l, c
ORDER BY l.fencing_token`, n.table, holdingColumns, holdings(n, "= $1")),

		// A primary-key range: [$1, $2) when $3, else [$1, ...), after $4
		// (the previous page's last key) when it is not NULL. Reads lock
		// nothing.
		// A name with several holders lists each, by token: a page ends
		// after a (key, token), $4 and $6.
		list: fmt.Sprintf(`WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now)
SELECT %[2]s FROM (%[3]s) l, c
WHERE ($4::text IS NULL OR (l.lease_name, l.fencing_token) > ($4::text, $6::bigint))
ORDER BY l.lease_name, l.fencing_token
LIMIT $5`, n.table, holdingColumns,
			holdings(n, ">= $1::text AND (NOT $3::boolean OR {name} < $2::text) AND ($4::text IS NULL OR {name} >= $4::text)")),

		// Like release, after the lock statement of the same transaction,
		// filtered by the token only (an operator's act, not a holder's),
		// and handing on the same way; it reports the holding it removed.
		// The head is never an entry of the holding's own attempt.
		revoke: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
head AS MATERIALIZED (
    SELECT %[3]s FROM %[2]s q, clock c
    WHERE q.lease_name = $1 AND q.expires_at > c.now AND q.holder_limit = 1
      AND NOT EXISTS (SELECT 1 FROM %[1]s o WHERE o.lease_name = $1 AND o.attempt = q.attempt)
    ORDER BY q.place LIMIT 1
),
gone AS (
    DELETE FROM %[1]s l USING clock c
    WHERE l.lease_name = $1 AND l.expires_at > c.now AND ($2::bigint = 0 OR l.fencing_token = $2::bigint)
      AND NOT (l.attempt = '' AND l.holder_limit > 1)
    RETURNING l.lease_name, l.owner_instance_id, l.fencing_token, l.expires_at, l.metadata, l.waited, true AS live, 1 AS holder_limit
),
%[4]s,
slock AS MATERIALIZED (
    SELECT 1 FROM %[1]s m WHERE m.lease_name = $1 AND m.attempt = '' AND m.holder_limit > 1 FOR UPDATE
),
sgone AS (
    DELETE FROM %[6]s h USING clock c
    WHERE EXISTS (SELECT 1 FROM slock) AND (h.lease_name, h.attempt) IN (
        SELECT o.lease_name, o.attempt FROM %[6]s o, clock c
        WHERE o.lease_name = $1 AND o.expires_at > c.now AND ($2::bigint = 0 OR o.fencing_token = $2::bigint)
          AND EXISTS (SELECT 1 FROM %[1]s m WHERE m.lease_name = $1 AND m.attempt = '' AND m.holder_limit > 1 AND m.expires_at > c.now)
        ORDER BY o.expires_at, o.fencing_token LIMIT 1)
    RETURNING %[7]s
),
%[8]s
SELECT %[5]s FROM (
    SELECT lease_name, owner_instance_id, fencing_token, expires_at, metadata, holder_limit FROM gone
    UNION ALL
    SELECT g.lease_name, g.owner_instance_id, g.fencing_token, g.expires_at, g.metadata, k.holder_limit FROM sgone g, srecord k
) l, clock c, (SELECT count(*) FROM notices) n, (SELECT count(*) FROM snotices) sn`, n.table, n.queue, headColumns,
			handOn(n, "$4", "$3", "false"), holdingColumns, n.holds, sgoneColumns, sharedHandOn(n, "$4", "$3", "''")),

		acquireShared: sharedAcquire(n),

		seq: n.sequence,
	}
}

// headColumns are the columns of the queue entry (q) that handOn needs.
const headColumns = `q.attempt, q.owner_instance_id, q.metadata, q.pickup_us, q.poll, q.notify_address, q.notify_channel`

// handOn is the part that release and revoke share, after their CTEs clock,
// head (the live head entry, headColumns, or no row) and gone (the holding
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
func handOn(n names, seq, channel, leaving string) string {
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

// sgoneColumns are what the sgone CTE of release and revoke returns about
// the shared holding it deleted (h, with the clock c).
const sgoneColumns = `h.lease_name, h.attempt, h.owner_instance_id, h.fencing_token, h.expires_at, h.metadata, h.expires_at > c.now AS live`

// sharedHandOn is the part of release and revoke for the names with several
// holders, after their CTEs clock, slock (which locks the name's record
// before any holding, as a renewal does: no deadlock between them) and
// sgone (the shared holding deleted, sgoneColumns; none for an exclusive
// name). srec is the name's record as
// the statement found it (xmin: its version). A live holding gone frees
// its slot, which is handed (shanded) to the head live entry of the queue
// under the record's limit (shead), entries of another limit ahead of it
// being dropped (sdequeued), as backend/limit.go says; the turns of the
// others start again (sturns). srecord moves the record: the handed
// holding's token is the name's latest, and its expiry becomes the latest
// of the live holdings (the statement's clock when none is left: the
// record has expired). A renewal, which does not take the name's lock,
// may have extended the record since the statement read it (its version
// differs): the record then only grows, so that it never ends before a
// holding of its name. snotices sends the hand-off's notice, or announces
// the release of a marked name when nothing was handed on. leaving is the
// attempt whose own entry the exclusive part removes (release), or the empty string (revoke: none).
func sharedHandOn(n names, seq, channel, leaving string) string {
	return fmt.Sprintf(`srec AS MATERIALIZED (
    SELECT m.xmin AS seen, m.holder_limit, m.waited FROM %[1]s m
    WHERE m.lease_name = $1 AND m.attempt = '' AND m.holder_limit > 1 AND EXISTS (SELECT 1 FROM sgone)
),
shead AS MATERIALIZED (
    SELECT %[6]s, q.place FROM %[2]s q, clock c, srec k
    WHERE q.lease_name = $1 AND q.expires_at > c.now AND q.holder_limit = k.holder_limit AND q.attempt <> %[5]s
      AND EXISTS (SELECT 1 FROM sgone g WHERE g.live) AND q.attempt NOT IN (SELECT attempt FROM sgone)
      AND NOT EXISTS (SELECT 1 FROM %[3]s o WHERE o.lease_name = $1 AND o.attempt = q.attempt AND o.expires_at > c.now)
    ORDER BY q.place LIMIT 1
),
shanded AS (
    INSERT INTO %[3]s AS o (lease_name, attempt, owner_instance_id, fencing_token, acquired_at, renewed_at, expires_at, metadata)
    SELECT $1, h.attempt, h.owner_instance_id, nextval(%[4]s::regclass), c.now, c.now,
           c.now + h.pickup_us * interval '1 microsecond', h.metadata
    FROM shead h, clock c
    ON CONFLICT (lease_name, attempt) DO UPDATE SET
        owner_instance_id = excluded.owner_instance_id, fencing_token = excluded.fencing_token,
        acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at,
        expires_at = excluded.expires_at, metadata = excluded.metadata
    RETURNING o.attempt, o.fencing_token, o.expires_at
),
sdequeued AS (
    DELETE FROM %[2]s q USING clock c, srec k
    WHERE q.lease_name = $1 AND q.expires_at > c.now AND q.attempt <> %[5]s AND EXISTS (SELECT 1 FROM sgone g WHERE g.live)
      AND (q.attempt IN (SELECT attempt FROM shead)
           OR (q.holder_limit <> k.holder_limit AND q.place < coalesce((SELECT place FROM shead), 9223372036854775807)))
),
sturns AS (
    UPDATE %[2]s q SET turn_started_at = NULL
    FROM clock c, srec k
    WHERE q.lease_name = $1 AND q.turn_started_at IS NOT NULL AND q.expires_at > c.now AND q.holder_limit = k.holder_limit
      AND q.attempt <> %[5]s AND q.attempt NOT IN (SELECT attempt FROM shead) AND EXISTS (SELECT 1 FROM shanded)
),
srecord AS (
    UPDATE %[1]s AS m SET
        fencing_token = coalesce((SELECT fencing_token FROM shanded), m.fencing_token),
        expires_at = CASE WHEN m.xmin = k.seen
            THEN coalesce(GREATEST(
                (SELECT max(o.expires_at) FROM %[3]s o
                 WHERE o.lease_name = $1 AND o.expires_at > c.now AND o.attempt NOT IN (SELECT attempt FROM sgone)),
                (SELECT expires_at FROM shanded)), c.now)
            ELSE GREATEST(m.expires_at, (SELECT expires_at FROM shanded)) END,
        waited = m.waited OR (EXISTS (SELECT 1 FROM shanded) AND EXISTS (
            SELECT 1 FROM %[2]s q WHERE q.lease_name = $1 AND q.expires_at > c.now AND q.attempt <> %[5]s
              AND q.attempt NOT IN (SELECT attempt FROM shead)))
    FROM clock c, srec k
    WHERE m.lease_name = $1 AND m.attempt = '' AND m.holder_limit > 1
    RETURNING m.holder_limit
),
snotices AS (
    SELECT pg_notify(h.notify_channel, '1 ' || x.fencing_token || ' ' || h.poll || ' ' || h.notify_address || ' ' || h.attempt
           || ' ' || octet_length(h.owner_instance_id) || ' ' || h.owner_instance_id || ' ' || $1::text)
    FROM shanded x, shead h WHERE h.notify_channel <> ''
    UNION ALL
    SELECT pg_notify(%[7]s, $1::text) FROM srec k WHERE k.waited AND NOT EXISTS (SELECT 1 FROM shanded)
)`, n.table, n.queue, n.holds, seq, leaving, headColumns, channel)
}

// holdings is the live holdings of the names that match cond (a condition
// on the name, {name} standing for the column), read at the clock c: the
// exclusive rows of the lease table (limit 1) and the shared holdings of
// the names whose record is live (the record's limit).
func holdings(n names, cond string) string {
	return fmt.Sprintf(`SELECT x.lease_name, x.owner_instance_id, x.fencing_token, x.expires_at, x.metadata, 1 AS holder_limit
    FROM %[1]s x, c WHERE x.lease_name %[3]s AND x.expires_at > c.now AND NOT (x.attempt = '' AND x.holder_limit > 1)
    UNION ALL
    SELECT h.lease_name, h.owner_instance_id, h.fencing_token, h.expires_at, h.metadata, m.holder_limit
    FROM %[2]s h JOIN %[1]s m ON m.lease_name = h.lease_name, c
    WHERE h.lease_name %[4]s AND h.expires_at > c.now
      AND m.attempt = '' AND m.holder_limit > 1 AND m.expires_at > c.now`,
		n.table, n.holds, strings.ReplaceAll(cond, "{name}", "x.lease_name"), strings.ReplaceAll(cond, "{name}", "h.lease_name"))
}

// sharedReleaseBody is the body of the release function (schema.go): the
// release of a holding of a name with several holders, as one statement
// with the function's parameters (key, owner, attempt, token, channel),
// after the name's lock of the calling transaction. It answers the number
// of notices sent.
func sharedReleaseBody(n names) string {
	seq := "'" + strings.ReplaceAll(n.sequence, "'", "''") + "'"
	return fmt.Sprintf(`
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
slock AS MATERIALIZED (
    SELECT 1 FROM %[1]s m WHERE m.lease_name = $1 AND m.attempt = '' AND m.holder_limit > 1 FOR UPDATE
),
sgone AS (
    DELETE FROM %[2]s h USING clock c
    WHERE h.lease_name = $1 AND h.owner_instance_id = $2 AND h.attempt = $3 AND ($4 = 0 OR h.fencing_token = $4)
      AND EXISTS (SELECT 1 FROM slock)
    RETURNING %[3]s
),
%[4]s
SELECT count(*) FROM snotices
`, n.table, n.holds, sgoneColumns, sharedHandOn(n, seq, "$5", "$3"))
}

// sharedRenewBody is the body of the renew function (schema.go): the
// renewal of a holding of a name with several holders (parameters key,
// owner, attempt, token, ttl_us), answering its new expiry or NULL. The
// name's record (the row of the lease table with an empty attempt) is extended
// first (record): the record never ends before a holding of its name. The
// holding is extended only once the record was (record's row is then locked
// until commit), so that a sweep deleting an expired record, which does not
// take the name's lock, cannot leave a renewed holding without one.
func sharedRenewBody(n names) string {
	return fmt.Sprintf(`
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
record AS (
    UPDATE %[1]s AS m SET expires_at = GREATEST(m.expires_at, c.now + $5 * interval '1 microsecond')
    FROM clock c
    WHERE m.lease_name = $1 AND m.attempt = '' AND m.holder_limit > 1 AND m.expires_at > c.now
      AND EXISTS (SELECT 1 FROM %[2]s h WHERE h.lease_name = $1 AND h.owner_instance_id = $2 AND h.attempt = $3
                  AND h.fencing_token = $4 AND h.expires_at > c.now)
    RETURNING m.lease_name
),
shared AS (
    UPDATE %[2]s AS h
    SET renewed_at = c.now, expires_at = c.now + $5 * interval '1 microsecond'
    FROM clock c, record m
    WHERE h.lease_name = m.lease_name AND h.owner_instance_id = $2 AND h.attempt = $3 AND h.fencing_token = $4
      AND h.expires_at > c.now
    RETURNING h.expires_at
)
SELECT expires_at FROM shared
`, n.table, n.holds)
}
