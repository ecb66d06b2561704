package postgres

import "fmt"

// queries holds the statements of one table, built once by New. Every value is
// a parameter; only the quoted table and sequence names are spliced in.
type queries struct {
	lock    string
	acquire string
	renew   string
	// renewBatch renews many holdings in one UPDATE joined to the requests
	// (parallel arrays; $5 carries each request's index back).
	renewBatch string
	release    string
	sweep      string
	seq        string // the quoted sequence name, sent as a regclass parameter
}

func buildQueries(n names) queries {
	return queries{
		lock: "SELECT pg_advisory_xact_lock($1)",

		// The clock is read once, after the lock (this statement runs after
		// the lock statement). nextval is drawn here too, after the lock, so
		// grants of one name get increasing tokens; a refresh of one's own
		// live row keeps its token and the drawn value is simply skipped.
		// When the WHERE rejects the update (another owner's live row), the
		// second branch reports that holder.
		acquire: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
granted AS (
    INSERT INTO %[1]s AS l (lease_name, owner_instance_id, fencing_token, acquired_at, renewed_at, expires_at, metadata)
    SELECT $1, $2, nextval($5::regclass), c.now, c.now, c.now + $3::bigint * interval '1 microsecond', $4 FROM clock c
    ON CONFLICT (lease_name) DO UPDATE SET
        owner_instance_id = excluded.owner_instance_id,
        fencing_token = CASE WHEN l.owner_instance_id = excluded.owner_instance_id AND l.expires_at > excluded.renewed_at
                             THEN l.fencing_token ELSE excluded.fencing_token END,
        acquired_at   = CASE WHEN l.owner_instance_id = excluded.owner_instance_id AND l.expires_at > excluded.renewed_at
                             THEN l.acquired_at ELSE excluded.acquired_at END,
        renewed_at = excluded.renewed_at,
        expires_at = excluded.expires_at,
        metadata   = excluded.metadata
    WHERE l.expires_at <= excluded.renewed_at OR l.owner_instance_id = excluded.owner_instance_id
    RETURNING l.fencing_token, l.expires_at
)
SELECT true, g.fencing_token, g.expires_at, ''::text FROM granted g
UNION ALL
SELECT false, 0::bigint, l.expires_at, l.owner_instance_id FROM %[1]s l
WHERE l.lease_name = $1 AND NOT EXISTS (SELECT 1 FROM granted)`, n.table),

		renew: fmt.Sprintf(`UPDATE %s AS l
SET renewed_at = c.now, expires_at = c.now + $4::bigint * interval '1 microsecond'
FROM (SELECT clock_timestamp() AS now) c
WHERE l.lease_name = $1 AND l.owner_instance_id = $2 AND l.fencing_token = $3 AND l.expires_at > c.now
RETURNING l.expires_at`, n.table),

		renewBatch: fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now)
UPDATE %s AS l
SET renewed_at = c.now, expires_at = c.now + r.ttl_us * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::int[]) AS r(name, owner, token, ttl_us, ord), clock c
WHERE l.lease_name = r.name AND l.owner_instance_id = r.owner AND l.fencing_token = r.token AND l.expires_at > c.now
RETURNING r.ord, l.expires_at`, n.table),

		// The notification is sent at commit, so a waiter never wakes before
		// the row is gone.
		release: fmt.Sprintf(`WITH gone AS (
    DELETE FROM %s
    WHERE lease_name = $1 AND owner_instance_id = $2 AND ($3::bigint = 0 OR fencing_token = $3::bigint)
    RETURNING lease_name
)
SELECT pg_notify($4, g.lease_name) FROM gone g`, n.table),

		// SKIP LOCKED: never wait on, or deadlock with, rows being granted.
		sweep: fmt.Sprintf(`DELETE FROM %[1]s WHERE lease_name IN (
    SELECT lease_name FROM %[1]s WHERE expires_at <= clock_timestamp()
    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`, n.table),

		seq: n.sequence,
	}
}
