package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold/backend"
)

// previousDDL is the DDL of the version before attempts, as that version's
// backend/postgres/schema.go wrote it.
func previousDDL(schema, table string) []string {
	n := newNames(schema, table)
	return []string{
		"CREATE SCHEMA IF NOT EXISTS " + n.schema,
		"CREATE SEQUENCE IF NOT EXISTS " + n.sequence + " AS bigint MINVALUE 1 START WITH 1 CACHE 1 NO CYCLE",
		"CREATE TABLE IF NOT EXISTS " + n.table + ` (
    lease_name        text COLLATE "C" NOT NULL PRIMARY KEY CHECK (char_length(lease_name) BETWEEN 1 AND 200),
    owner_instance_id text COLLATE "C" NOT NULL CHECK (char_length(owner_instance_id) BETWEEN 1 AND 200),
    fencing_token     bigint NOT NULL CHECK (fencing_token > 0),
    acquired_at       timestamptz NOT NULL,
    renewed_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    metadata          text NOT NULL DEFAULT '' CHECK (octet_length(metadata) <= 4000)
)`,
		"CREATE INDEX IF NOT EXISTS " + n.index + " ON " + n.table + " (expires_at)",
	}
}

// previousAcquire and previousRenew are the statements of the previous
// version (same commit, queries.go), verbatim: what a process still running
// it sends.
func previousAcquire(n names) string {
	return fmt.Sprintf(`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
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
WHERE l.lease_name = $1 AND NOT EXISTS (SELECT 1 FROM granted)`, n.table)
}

func previousRenew(n names) string {
	return fmt.Sprintf(`UPDATE %s AS l
SET renewed_at = c.now, expires_at = c.now + $4::bigint * interval '1 microsecond'
FROM (SELECT clock_timestamp() AS now) c
WHERE l.lease_name = $1 AND l.owner_instance_id = $2 AND l.fencing_token = $3 AND l.expires_at > c.now
RETURNING l.expires_at`, n.table)
}

// oldGrant acquires key for owner the way the previous version does.
func oldGrant(ctx context.Context, pool *pgxpool.Pool, n names, key, owner string, ttl time.Duration) (token uint64, expires time.Time, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var ok bool
		var holder string
		var tok int64
		if err := tx.QueryRow(ctx, previousAcquire(n), key, owner, ttl.Microseconds(), "", n.sequence).Scan(&ok, &tok, &expires, &holder); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%q is held by %q", key, holder)
		}
		token = uint64(tok)
		return nil
	})
	return token, expires, err
}

// A table made by the previous version, with its holdings in it, is upgraded
// by EnsureSchema. The old rows are never refreshed, renewed or released by
// the new version (not even by a new attempt of the same owner), and expire
// normally; the old version can still renew its own, but can no longer
// acquire (attempt is NOT NULL), so it cannot make or refresh a holding the
// new version could not tell apart. New holdings work as on a new table.
func TestEnsureSchemaUpgradesPreviousTable(t *testing.T) {
	admin := newPool(t, "lh_admin")
	ctx := ctxT(t)
	schema, table := randomName("lh_test_"), DefaultTable
	n := newNames(schema, table)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+n.schema+" CASCADE") })
	for _, stmt := range previousDDL(schema, table) {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("previous DDL: %v", err)
		}
	}
	liveTok, _, err := oldGrant(ctx, admin, n, "old-live", "a", live)
	if err != nil {
		t.Fatal(err)
	}
	shortTok, shortExp, err := oldGrant(ctx, admin, n, "old-short", "a", 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}

	for range 2 { // the upgrade, then a call that finds nothing to do
		if err := EnsureSchema(ctx, admin, schema, table); err != nil {
			t.Fatalf("EnsureSchema on the previous table: %v", err)
		}
	}
	var notNull, hasDefault bool
	var checks int
	if err := admin.QueryRow(ctx, `SELECT a.attnotnull, a.atthasdef,
		(SELECT count(*) FROM pg_constraint c WHERE c.conrelid = a.attrelid AND c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%attempt%')
		FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attname = 'attempt'`, n.table).Scan(&notNull, &hasDefault, &checks); err != nil {
		t.Fatalf("attempt column after the upgrade: %v", err)
	}
	if !notNull || hasDefault || checks != 1 {
		t.Fatalf("attempt column: NOT NULL %v, default %v, %d CHECKs; want NOT NULL, no default, one CHECK", notNull, hasDefault, checks)
	}

	b, err := New(admin, WithTable(schema, table), WithSweep(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	// The old live holding: refused to anybody, its own owner's new attempt
	// included; never renewed or released by the new version.
	for _, owner := range []string{"a", "b"} {
		busy := acquireAs(t, b, "old-live", owner, newAttempt(), live)
		if busy.Acquired || busy.Holder != "a" || busy.HolderToken != liveTok || busy.HolderExpiresIn <= 0 {
			t.Fatalf("Acquire(old-live) by %s = %+v, want refused by a's old holding %d", owner, busy.Grant, liveTok)
		}
	}
	if _, err := b.Renew(ctx, backend.RenewRequest{Key: "old-live", Owner: "a", Attempt: newAttempt(), Token: liveTok, TTL: live}); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("new Renew of the old holding = %v, want ErrNotHeld", err)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "old-live", Owner: "a", Attempt: newAttempt()}); err != nil {
		t.Fatal(err)
	}
	var still int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+n.table+" WHERE lease_name = 'old-live'").Scan(&still); err != nil || still != 1 {
		t.Fatalf("the old holding after a new release: %d rows, %v", still, err)
	}
	// The old version renews its own holding still...
	var renewed time.Time
	if err := admin.QueryRow(ctx, previousRenew(n), "old-live", "a", int64(liveTok), live.Microseconds()).Scan(&renewed); err != nil {
		t.Fatalf("old renew after the upgrade: %v", err)
	}
	// ...but cannot acquire any more, not even a key nobody holds.
	var pgErr *pgconn.PgError
	if _, _, err := oldGrant(ctx, admin, n, "free", "a", live); !errors.As(err, &pgErr) || pgErr.Code != "23502" {
		t.Fatalf("old acquire after the upgrade = %v, want a not-null violation", err)
	}

	// The old short holding expires normally and goes to a new attempt, with
	// a greater token.
	waitPast(t, admin, shortExp)
	g := mustAcquire(t, b, "old-short", "a", live)
	if g.Token <= shortTok || g.Token <= liveTok {
		t.Fatalf("token %d after the old holdings %d and %d", g.Token, shortTok, liveTok)
	}
	if err := b.Release(ctx, g.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if got := acquireAs(t, b, "old-short", "b", newAttempt(), live); !got.Acquired {
		t.Fatalf("released key refused: %+v", got.Grant)
	}
}

// EnsureSchema fails, naming the object and what it should be, when an object
// under one of its names is of the wrong kind, and then changes nothing.
func TestEnsureSchemaRefusesObjectsOfTheWrongKind(t *testing.T) {
	admin := newPool(t, "lh_admin")
	seq, idx := DefaultTable+seqSuffix, DefaultTable+indexSuffix
	queue, qidx := DefaultTable+queueSuffix, DefaultTable+queueIndexSuffix
	holds, hidx := DefaultTable+holdsSuffix, DefaultTable+holdsIndexSuffix
	cases := []struct {
		name, setup, want string
	}{
		{"table as sequence", `CREATE TABLE %s."` + seq + `" (x int)`, "is a table, not a sequence"},
		{"view as sequence", `CREATE VIEW %s."` + seq + `" AS SELECT 1 AS x`, "is a view, not a sequence"},
		{"cycling sequence", `CREATE SEQUENCE %s."` + seq + `" CYCLE`, "NO CYCLE"},
		{"descending sequence", `CREATE SEQUENCE %s."` + seq + `" INCREMENT -1`, "positive increment"},
		{"view as table", `CREATE VIEW %s."` + DefaultTable + `" AS SELECT 1 AS x`, "is a view, not a table"},
		{"unrelated table", `CREATE TABLE %s."` + DefaultTable + `" (lease_name text PRIMARY KEY, owner text)`, "has no column owner_instance_id"},
		{"table as index", `CREATE TABLE %s."` + idx + `" (x int)`, "is a table, not the expiry index"},
		{"index of another table", `CREATE TABLE %[1]s.other (x int); CREATE INDEX "` + idx + `" ON %[1]s.other (x)`, "is not on"},
		{"view as queue", `CREATE VIEW %s."` + queue + `" AS SELECT 1 AS x`, "is a view, not a table"},
		{"unrelated table as queue", `CREATE TABLE %s."` + queue + `" (lease_name text, attempt text)`, "has no column place: it is not a waiter queue"},
		{"sequence as queue index", `CREATE SEQUENCE %s."` + qidx + `"`, "is a sequence, not the expiry index"},
		{"view as holds", `CREATE VIEW %s."` + holds + `" AS SELECT 1 AS x`, "is a view, not a table"},
		{"unrelated table as holds", `CREATE TABLE %s."` + holds + `" (lease_name text, attempt text)`, "has no column owner_instance_id: it is not the table of shared holdings"},
		{"sequence as holds index", `CREATE SEQUENCE %s."` + hidx + `"`, "is a sequence, not the expiry index"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			schema := randomName("lh_test_")
			qs := newNames(schema, DefaultTable).schema
			t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+qs+" CASCADE") })
			if _, err := admin.Exec(ctx, "CREATE SCHEMA "+qs+"; "+fmt.Sprintf(c.setup, qs)); err != nil {
				t.Fatal(err)
			}
			objects := func() string {
				var s string
				if err := admin.QueryRow(ctx, `SELECT coalesce(string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname), '')
					FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = $1`, schema).Scan(&s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			before := objects()
			err := EnsureSchema(ctx, admin, schema, DefaultTable)
			if !errors.Is(err, ErrSchemaConflict) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("EnsureSchema = %v, want ErrSchemaConflict saying %q", err, c.want)
			}
			t.Log(err)
			if after := objects(); after != before {
				t.Fatalf("EnsureSchema changed the schema: %s, was %s", after, before)
			}
		})
	}
}

// A table of the version with attempts but without the waited mark gets the
// column from EnsureSchema; its live rows read unmarked, and a waiter's mark
// then makes their release announced.
func TestEnsureSchemaAddsWaited(t *testing.T) {
	e := newEnv(t)
	n := newNames(e.schema, e.table)
	b := e.backend(t)
	h := mustAcquire(t, b, "k", "a", live)
	if _, err := e.admin.Exec(ctxT(t), "ALTER TABLE "+n.table+" DROP COLUMN waited"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the upgrade, then a call that finds nothing to do
		if err := EnsureSchema(ctxT(t), e.admin, e.schema, e.table); err != nil {
			t.Fatalf("EnsureSchema on a table without waited: %v", err)
		}
	}
	var waited bool
	if err := e.admin.QueryRow(ctxT(t), "SELECT waited FROM "+n.table+" WHERE lease_name = 'k'").Scan(&waited); err != nil || waited {
		t.Fatalf("waited after the upgrade = %v, %v; want false", waited, err)
	}
	next := listener(t, b)
	markWaited(t, b, "k")
	if err := b.Release(ctxT(t), h.releaseReq()); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "k" {
		t.Fatalf("notification for %q, want k", got)
	}
}
