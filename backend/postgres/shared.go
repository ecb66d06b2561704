package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

// Names with several holders (backend/limit.go). A name acquired with Limit
// n > 1 keeps its holdings in the holds table, one row per (name, attempt),
// and one row of the lease table, its record: attempt '' (which no request
// can name), holder_limit n, fencing_token the latest token of the name,
// expires_at never before the end of a live holding of the name (the end
// of the last, once the name's lock was taken; a renewal, which takes no
// lock, only extends it). The exclusive rows are untouched: an exclusive
// acquire, release or renewal sends as many statements, in as many round
// trips, as before; they read the record as a live holding of another limit,
// and the renewal and release call the shared functions (queries.go) only
// for a name that has a record. A version of this
// package without the holds table reads the record as a live holding too
// and refuses the name; the keep trigger makes its revoke fail.
//
// The acquire is the acquire function (sharedAcquireBody), called in the
// same one-round-trip transaction as the exclusive acquire statement (BEGIN,
// the name's lock, the call, COMMIT): the name's lock is never held while
// the server waits for the client.

// recordOwner is the owner of a name's record, as versions that do not
// know the record show it.
const recordOwner = "leasehold: several holders"

// sharedAcquire is the statement that calls the acquire function, answering
// the columns of the exclusive acquire statement (readAcquire reads both).
func sharedAcquire(n names) string {
	return `SELECT * FROM ` + n.acquire + `($1, $2, $3, $4::bigint, $5, $6::regclass, $7::boolean, $8::bigint, $9::bigint, $10, $11, $12::bigint, $13::integer)`
}

// queueAcquireShared queues the transaction of an acquire with r.Limit > 1,
// as queueAcquire does for an exclusive one.
func (b *Backend) queueAcquireShared(batch *pgx.Batch, r backend.AcquireRequest, lock string) {
	q := r.Queue // valid: only with Wait (r.Validate)
	channel := ""
	if q.Notify != "" {
		channel = b.handOffChannel(q.Notify)
	}
	batch.Queue("BEGIN")
	batch.Queue(lock, b.lockKey(r.Key))
	batch.Queue(b.q.acquireShared, r.Key, r.Owner, r.Attempt, r.TTL.Microseconds(), r.Metadata, b.q.seq, r.Wait,
		q.EntryTTL.Microseconds(), q.Pickup.Microseconds(), q.Notify, channel, int64(q.Poll), int32(r.Limit))
	batch.Queue("COMMIT")
}

// queueAnyAcquire queues the acquire transaction that r's limit needs.
func (b *Backend) queueAnyAcquire(batch *pgx.Batch, r backend.AcquireRequest, lock string) {
	if r.Limit > 1 {
		b.queueAcquireShared(batch, r, lock)
		return
	}
	b.queueAcquire(batch, r, lock)
}

// sharedAcquireBody is the body of the acquire function (schema.go): the
// acquire of one of p_limit slots of p_key, after the name's lock taken by
// the calling transaction, answering one row as the exclusive acquire
// statement does. In order: the name's row and then its holdings are locked
// (in the order a renewal takes them, so that no renewal extends one that
// this call finds expired) and the clock is read once; a live exclusive
// holding, or live holdings of another limit, refuse (HeldLimit); the
// attempt's own live holding is refreshed; the free slots go to the live
// entries of the limit queued ahead of the attempt (hand-offs, each
// notified); the heads' turns apply when the attempt is not among the first
// free entries; then the attempt is granted, leaves the queue and the record
// is moved on, or it is refused (and queued when it waits). A record that
// changed kind under the call (only a writer that does not take the name's
// lock can do that) raises serialization_failure: the acquire is tried
// again.
func sharedAcquireBody(n names) string {
	return strings.NewReplacer(
		"{table}", n.table, "{queue}", n.queue, "{holds}", n.holds,
		"{maxq}", fmt.Sprint(backend.MaxQueueEntries), "{record}", quoteLiteral(recordOwner),
	).Replace(`
#variable_conflict use_column
DECLARE
    v_now      timestamptz;
    v_rec      record;
    v_live     boolean := false;
    v_n        integer;
    v_free     integer;
    v_e        record;
    v_gone     text[] := '{}';
    v_handed   integer := 0;
    v_last     bigint;
    v_wait     boolean := false;
    v_first    record;
    v_latest   timestamptz;
    v_att      text[];
    v_own      text[];
    v_pick     bigint[];
    v_start    timestamptz[];
    v_starts   text[] := '{}';
    v_lapsed   text[] := '{}';
    v_pos      integer;
    v_lapse    integer;
    v_left     interval;
    v_shortest interval;
    v_token    bigint;
    v_expires  timestamptz;
    v_ok       boolean;
    v_named    boolean := true;
BEGIN
    o_acquired := false; o_token := 0; o_holder := ''; o_left_us := 0; o_queued := false; o_held_limit := 0;
    PERFORM 1 FROM {table} WHERE lease_name = p_key FOR UPDATE;
    PERFORM 1 FROM {holds} WHERE lease_name = p_key FOR UPDATE;
    v_now := clock_timestamp();
    SELECT attempt = '' AND holder_limit > 1 AS shared, holder_limit, owner_instance_id, fencing_token, expires_at
        INTO v_rec FROM {table} WHERE lease_name = p_key AND expires_at > v_now;
    v_live := FOUND;
    IF v_live THEN
        IF NOT v_rec.shared THEN -- an exclusive holding: limit 1
            o_token := v_rec.fencing_token; o_expires := v_rec.expires_at; o_holder := v_rec.owner_instance_id;
            o_left_us := GREATEST(0, extract(epoch FROM v_rec.expires_at - v_now) * 1000000)::bigint;
            o_held_limit := 1;
            RETURN;
        END IF;
    END IF;
    DELETE FROM {holds} WHERE lease_name = p_key AND (expires_at <= v_now OR NOT v_live);
    SELECT count(*) INTO v_n FROM {holds} WHERE lease_name = p_key;
    IF v_n = 0 THEN
        v_live := false; -- the record outlived its holdings: the name is free
    END IF;
    <<decide>>
    BEGIN
        IF v_live THEN
            IF v_rec.holder_limit <> p_limit THEN
                SELECT owner_instance_id, fencing_token, expires_at INTO v_first FROM {holds}
                    WHERE lease_name = p_key ORDER BY expires_at, fencing_token LIMIT 1;
                o_token := v_first.fencing_token; o_expires := v_first.expires_at; o_holder := v_first.owner_instance_id;
                o_left_us := GREATEST(0, extract(epoch FROM v_first.expires_at - v_now) * 1000000)::bigint;
                o_held_limit := v_rec.holder_limit;
                RETURN;
            END IF;
            -- The same attempt again: refreshed, keeping its token.
            UPDATE {holds} SET renewed_at = v_now, expires_at = v_now + p_ttl_us * interval '1 microsecond', metadata = p_metadata
                WHERE lease_name = p_key AND attempt = p_attempt AND owner_instance_id = p_owner
                RETURNING fencing_token, expires_at INTO v_token, v_expires;
            IF FOUND THEN
                UPDATE {table} SET expires_at = GREATEST(expires_at, v_expires)
                    WHERE lease_name = p_key AND attempt = '' AND holder_limit > 1;
                o_acquired := true; o_token := v_token; o_expires := v_expires;
                RETURN;
            END IF;
            IF v_n >= p_limit THEN
                EXIT decide;
            END IF;
            -- Free slots go to the live entries of this limit queued ahead,
            -- in order; entries of another limit, or of an attempt that
            -- holds already, are dropped on the way.
            v_free := p_limit - v_n;
            FOR v_e IN SELECT attempt, owner_instance_id, pickup_us, holder_limit, metadata, notify_address, notify_channel, poll
                    FROM {queue} WHERE lease_name = p_key AND expires_at > v_now ORDER BY place LOOP
                EXIT WHEN v_free = 0 OR (v_e.attempt = p_attempt AND v_e.owner_instance_id = p_owner);
                v_gone := v_gone || v_e.attempt;
                CONTINUE WHEN v_e.holder_limit <> p_limit
                    OR EXISTS (SELECT 1 FROM {holds} WHERE lease_name = p_key AND attempt = v_e.attempt);
                INSERT INTO {holds} (lease_name, attempt, owner_instance_id, fencing_token, acquired_at, renewed_at, expires_at, metadata)
                    VALUES (p_key, v_e.attempt, v_e.owner_instance_id, nextval(p_seq), v_now, v_now,
                            v_now + v_e.pickup_us * interval '1 microsecond', v_e.metadata)
                    RETURNING fencing_token INTO v_last;
                IF v_e.notify_channel <> '' THEN
                    PERFORM pg_notify(v_e.notify_channel, '1 ' || v_last || ' ' || v_e.poll || ' ' || v_e.notify_address || ' ' || v_e.attempt
                        || ' ' || octet_length(v_e.owner_instance_id) || ' ' || v_e.owner_instance_id || ' ' || p_key);
                END IF;
                v_handed := v_handed + 1;
                v_free := v_free - 1;
            END LOOP;
            IF v_handed > 0 OR cardinality(v_gone) > 0 THEN
                DELETE FROM {queue} WHERE lease_name = p_key AND attempt = ANY(v_gone);
            END IF;
            v_wait := EXISTS (SELECT 1 FROM {queue} WHERE lease_name = p_key AND expires_at > v_now);
            v_n := v_n + v_handed;
            IF v_handed > 0 AND v_n >= p_limit THEN
                -- Every slot is taken now: refused as by full slots.
                SELECT max(expires_at) INTO v_latest FROM {holds} WHERE lease_name = p_key;
                UPDATE {table} SET fencing_token = v_last, expires_at = GREATEST(expires_at, v_latest), waited = waited OR v_wait
                    WHERE lease_name = p_key AND attempt = '' AND holder_limit > 1;
                EXIT decide;
            END IF;
        END IF;
        -- The heads' turns: the first v_free live entries have theirs, each
        -- for its pickup window from when a slot was first found free for
        -- it; a head that let its turn pass leaves the queue.
        v_free := p_limit - v_n;
        DELETE FROM {queue} WHERE lease_name = p_key AND expires_at <= v_now;
        SELECT coalesce(array_agg(attempt ORDER BY place), '{}'), coalesce(array_agg(owner_instance_id ORDER BY place), '{}'),
               coalesce(array_agg(pickup_us ORDER BY place), '{}'), coalesce(array_agg(turn_started_at ORDER BY place), '{}')
            INTO v_att, v_own, v_pick, v_start FROM {queue} WHERE lease_name = p_key;
        LOOP
            v_pos := cardinality(v_att) + 1;
            FOR i IN 1 .. cardinality(v_att) LOOP
                IF v_att[i] = p_attempt AND v_own[i] = p_owner THEN
                    v_pos := i;
                    EXIT;
                END IF;
            END LOOP;
            IF v_pos <= v_free THEN
                v_shortest := NULL;
                EXIT;
            END IF;
            v_shortest := NULL;
            v_lapse := 0;
            FOR i IN 1 .. v_free LOOP
                IF v_start[i] IS NULL THEN
                    v_start[i] := v_now;
                    v_starts := v_starts || v_att[i];
                END IF;
                v_left := v_start[i] + v_pick[i] * interval '1 microsecond' - v_now;
                IF v_left <= interval '0' THEN
                    v_lapse := i;
                    EXIT;
                END IF;
                v_shortest := LEAST(v_shortest, v_left);
            END LOOP;
            EXIT WHEN v_lapse = 0;
            v_lapsed := v_lapsed || v_att[v_lapse];
            v_att := v_att[:v_lapse - 1] || v_att[v_lapse + 1:];
            v_own := v_own[:v_lapse - 1] || v_own[v_lapse + 1:];
            v_pick := v_pick[:v_lapse - 1] || v_pick[v_lapse + 1:];
            v_start := v_start[:v_lapse - 1] || v_start[v_lapse + 1:];
        END LOOP;
        IF cardinality(v_lapsed) > 0 THEN
            DELETE FROM {queue} WHERE lease_name = p_key AND attempt = ANY(v_lapsed);
        END IF;
        IF cardinality(v_starts) > 0 THEN
            UPDATE {queue} SET turn_started_at = v_now
                WHERE lease_name = p_key AND attempt = ANY(v_starts) AND turn_started_at IS NULL;
        END IF;
        IF v_shortest IS NOT NULL THEN -- heads of the queue have their turn
            o_expires := v_now + v_shortest;
            o_left_us := (extract(epoch FROM v_shortest) * 1000000)::bigint;
            v_named := false;
            EXIT decide;
        END IF;
        -- The grant.
        INSERT INTO {holds} AS h (lease_name, attempt, owner_instance_id, fencing_token, acquired_at, renewed_at, expires_at, metadata)
            VALUES (p_key, p_attempt, p_owner, nextval(p_seq), v_now, v_now, v_now + p_ttl_us * interval '1 microsecond', p_metadata)
            ON CONFLICT (lease_name, attempt) DO UPDATE SET
                owner_instance_id = excluded.owner_instance_id, fencing_token = excluded.fencing_token,
                acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, expires_at = excluded.expires_at, metadata = excluded.metadata
            RETURNING h.fencing_token, h.expires_at INTO v_token, v_expires;
        DELETE FROM {queue} WHERE lease_name = p_key AND attempt = p_attempt AND owner_instance_id = p_owner;
        v_wait := EXISTS (SELECT 1 FROM {queue} WHERE lease_name = p_key AND attempt <> p_attempt);
        IF v_wait THEN
            UPDATE {queue} SET turn_started_at = NULL WHERE lease_name = p_key AND attempt <> p_attempt AND turn_started_at IS NOT NULL;
        END IF;
        SELECT max(expires_at) INTO v_latest FROM {holds} WHERE lease_name = p_key;
        -- The record: a live one of this limit is moved on (latest token,
        -- the latest expiry); anything else (an expired row, exclusive or
        -- not) is replaced.
        INSERT INTO {table} AS m (lease_name, owner_instance_id, attempt, fencing_token, acquired_at, renewed_at, expires_at, metadata, waited, holder_limit)
            VALUES (p_key, {record}, '', v_token, v_now, v_now, v_latest, '', v_wait, p_limit)
            ON CONFLICT (lease_name) DO UPDATE SET
                owner_instance_id = excluded.owner_instance_id,
                attempt       = '',
                fencing_token = excluded.fencing_token,
                acquired_at   = CASE WHEN m.expires_at > excluded.renewed_at THEN m.acquired_at ELSE excluded.acquired_at END,
                renewed_at    = excluded.renewed_at,
                expires_at    = CASE WHEN m.expires_at > excluded.renewed_at THEN GREATEST(m.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
                metadata      = '',
                waited        = CASE WHEN m.expires_at > excluded.renewed_at THEN m.waited OR excluded.waited ELSE excluded.waited END,
                holder_limit  = excluded.holder_limit
            WHERE m.expires_at <= excluded.renewed_at OR (m.attempt = '' AND m.holder_limit > 1)
            RETURNING true INTO v_ok;
        IF v_ok IS NULL THEN
            RAISE EXCEPTION 'leasehold: the record of lease % changed during the acquire', p_key USING ERRCODE = '40001';
        END IF;
        o_acquired := true; o_token := v_token; o_expires := v_expires;
        RETURN;
    END decide;
    -- Refused: the holding that ends first is named (none for a turn).
    IF v_named THEN
        SELECT owner_instance_id, fencing_token, expires_at INTO v_first FROM {holds}
            WHERE lease_name = p_key ORDER BY expires_at, fencing_token LIMIT 1;
        o_token := v_first.fencing_token; o_expires := v_first.expires_at; o_holder := v_first.owner_instance_id;
        o_left_us := GREATEST(0, extract(epoch FROM v_first.expires_at - v_now) * 1000000)::bigint;
    END IF;
    IF v_live AND p_wait THEN
        UPDATE {table} SET waited = true WHERE lease_name = p_key AND attempt = '' AND holder_limit > 1 AND NOT waited;
    END IF;
    IF p_wait AND p_entry_ttl_us > 0 THEN
        INSERT INTO {queue} AS q (lease_name, attempt, owner_instance_id, metadata, notify_address, notify_channel, pickup_us, poll, expires_at, holder_limit)
            SELECT p_key, p_attempt, p_owner, p_metadata, p_notify, p_channel, p_pickup_us, p_poll, v_now + p_entry_ttl_us * interval '1 microsecond', p_limit
            WHERE (SELECT count(*) FROM (SELECT FROM {queue} x
                   WHERE x.lease_name = p_key AND x.attempt <> p_attempt AND x.expires_at > v_now LIMIT {maxq}) n) < {maxq}
            ON CONFLICT (lease_name, attempt) DO UPDATE SET
                place           = CASE WHEN q.expires_at > v_now THEN q.place ELSE excluded.place END,
                turn_started_at = CASE WHEN q.expires_at > v_now THEN q.turn_started_at END,
                metadata        = excluded.metadata,
                notify_address  = excluded.notify_address,
                notify_channel  = excluded.notify_channel,
                pickup_us       = excluded.pickup_us,
                poll            = excluded.poll,
                expires_at      = excluded.expires_at,
                holder_limit    = excluded.holder_limit
            WHERE q.owner_instance_id = excluded.owner_instance_id
            RETURNING true INTO o_queued;
        IF o_queued IS NULL THEN
            o_queued := EXISTS (SELECT 1 FROM {queue} WHERE lease_name = p_key AND attempt = p_attempt
                AND owner_instance_id = p_owner AND expires_at > v_now);
        END IF;
    END IF;
END
`)
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
