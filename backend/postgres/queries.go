package postgres

import "fmt"

// queries holds the statements of one table, built once by New. Every value is
// a parameter; only the quoted table and sequence names are spliced in.
type queries struct {
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
		// the lock statement). nextval is drawn here too, after the lock, so
		// grants of one name get increasing tokens; a refresh of the same
		// attempt's live row keeps its token and the drawn value is simply
		// skipped. When the WHERE rejects the update (a live row of another
		// holding), the second branch reports that holding, with the time it
		// has left measured on the same clock reading. A refused attempt
		// that will wait ($7) marks that holding (marked: the row is the one
		// the upsert locked and left alone), so that its release is
		// announced; a new grant starts unmarked, a refresh keeps the mark.
		acquire: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
granted AS (
    INSERT INTO %[1]s AS l (lease_name, owner_instance_id, attempt, fencing_token, acquired_at, renewed_at, expires_at, metadata)
    SELECT $1, $2, $3, nextval($6::regclass), c.now, c.now, c.now + $4::bigint * interval '1 microsecond', $5 FROM clock c
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
)
SELECT true, g.fencing_token, g.expires_at, ''::text, 0::bigint FROM granted g
UNION ALL
SELECT false, l.fencing_token, l.expires_at, l.owner_instance_id,
       GREATEST(0, extract(epoch FROM l.expires_at - c.now) * 1000000)::bigint
FROM %[1]s l, clock c
WHERE l.lease_name = $1 AND NOT EXISTS (SELECT 1 FROM granted)`, n.table),

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

		// The notification is sent at commit, so a waiter never wakes before
		// the row is gone. Token 0 means whatever token this attempt's
		// holding has: only that attempt's row can match. Only a holding
		// that a waiting attempt marked is announced: nobody listens for the
		// others, and a NOTIFY costs every listener a wake-up.
		release: fmt.Sprintf(`WITH gone AS (
    DELETE FROM %s
    WHERE lease_name = $1 AND owner_instance_id = $2 AND attempt = $3 AND ($4::bigint = 0 OR fencing_token = $4::bigint)
    RETURNING lease_name, waited
)
SELECT pg_notify($5, g.lease_name) FROM gone g WHERE g.waited`, n.table),

		// SKIP LOCKED: never wait on, or deadlock with, rows being granted.
		// Sweeps keep the server's commit mode: a lost sweep only brings
		// back rows that are expired anyway.
		sweep: fmt.Sprintf(`DELETE FROM %[1]s WHERE lease_name IN (
    SELECT lease_name FROM %[1]s WHERE expires_at <= clock_timestamp()
    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`, n.table),

		inspect: fmt.Sprintf(`SELECT %[2]s
FROM %[1]s l, (SELECT clock_timestamp() AS now) c
WHERE l.lease_name = $1 AND l.expires_at > c.now`, n.table, holdingColumns),

		// A primary-key range: [$1, $2) when $3, else [$1, ...), after $4
		// (the previous page's last key) when it is not NULL. Reads lock
		// nothing.
		list: fmt.Sprintf(`SELECT %[2]s
FROM %[1]s l, (SELECT clock_timestamp() AS now) c
WHERE l.lease_name >= $1::text AND (NOT $3::boolean OR l.lease_name < $2::text)
  AND ($4::text IS NULL OR l.lease_name > $4::text)
  AND l.expires_at > c.now
ORDER BY l.lease_name
LIMIT $5`, n.table, holdingColumns),

		// Like release, after the lock statement of the same transaction,
		// filtered by the token only: an operator's act, not a holder's.
		// Announced, like a release, only when a waiter marked the holding
		// (CASE: pg_notify is evaluated for marked rows only).
		revoke: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
gone AS (
    DELETE FROM %[1]s l USING clock c
    WHERE l.lease_name = $1 AND l.expires_at > c.now AND ($2::bigint = 0 OR l.fencing_token = $2::bigint)
    RETURNING l.*
)
SELECT %[2]s FROM gone l, clock c
WHERE CASE WHEN l.waited THEN pg_notify($3, l.lease_name) IS NOT NULL ELSE true END`, n.table, holdingColumns),

		seq: n.sequence,
	}
}
