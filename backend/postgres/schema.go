package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/backend"
)

// ErrInvalidIdentifier is returned (wrapped) for a schema or table name that
// cannot be used.
var ErrInvalidIdentifier = errors.New("postgres: invalid identifier")

// Identifier limits. PostgreSQL silently truncates names longer than 63 bytes,
// which could make two tables share one name, so longer names are rejected.
// The table name leaves room for the longest derived name (the index).
const (
	maxIdentBytes = 63
	seqSuffix     = "_token_seq"
	indexSuffix   = "_expires_at_idx"
	// queueSuffix names the waiter queue's table, queueIndexSuffix its
	// expiry index: both no longer than indexSuffix (checked below).
	queueSuffix      = "_queue"
	queueIndexSuffix = "_queue_exp_idx"
	// holdsSuffix names the table of the holdings of names with several
	// holders, holdsIndexSuffix its expiry index, keepSuffix the function
	// of the trigger that keeps their record: all no longer than
	// indexSuffix (checked below).
	holdsSuffix      = "_holds"
	holdsIndexSuffix = "_holds_exp_idx"
	keepSuffix       = "_keep_shared"
	// releaseSuffix and renewSuffix name the functions that release and
	// renew a shared holding.
	releaseSuffix = "_release_shared"
	renewSuffix   = "_renew_shared"
	// acquireSuffix names the function that acquires a slot of a name
	// with several holders.
	acquireSuffix = "_acquire_shared"
	// MaxTableBytes is the longest table name, in bytes.
	MaxTableBytes = maxIdentBytes - len(indexSuffix)
)

// The queue's names fit wherever the index's name fits (a negative constant
// does not compile as a uint).
const (
	_ = uint(len(indexSuffix) - len(queueIndexSuffix))
	_ = uint(len(indexSuffix) - len(holdsIndexSuffix))
	_ = uint(len(indexSuffix) - len(keepSuffix))
	_ = uint(len(indexSuffix) - len(releaseSuffix))
	_ = uint(len(indexSuffix) - len(renewSuffix))
	_ = uint(len(indexSuffix) - len(acquireSuffix))
)

// ValidateTable reports whether schema and table can name a lease table, as
// New and EnsureSchema check them: neither empty, invalid UTF-8 nor holding a
// NUL byte; the schema at most 63 bytes, the table at most MaxTableBytes (so
// that the names derived from it fit PostgreSQL's 63). Any other character,
// quotes and semicolons included, is allowed: names are always quoted.
// Errors wrap ErrInvalidIdentifier.
func ValidateTable(schema, table string) error {
	if err := validateIdentifier("schema", schema, maxIdentBytes); err != nil {
		return err
	}
	return validateIdentifier("table", table, MaxTableBytes)
}

func validateIdentifier(what, name string, maxBytes int) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalidIdentifier, what)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s name is not valid UTF-8", ErrInvalidIdentifier, what)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %s name contains a NUL byte", ErrInvalidIdentifier, what)
	case len(name) > maxBytes:
		return fmt.Errorf("%w: %s name is %d bytes, more than %d", ErrInvalidIdentifier, what, len(name), maxBytes)
	}
	return nil
}

// names holds the quoted, schema-qualified names derived from schema and table.
type names struct {
	schema     string // quoted schema
	table      string // quoted, qualified table
	sequence   string // quoted, qualified sequence
	index      string // quoted index name (indexes live in the table's schema)
	queue      string // quoted, qualified waiter queue table
	queueIndex string // quoted name of the queue's expiry index
	holds      string // quoted, qualified table of the shared holdings
	holdsIndex string // quoted name of its expiry index
	keep       string // quoted, qualified function of the keep trigger
	keepName   string // quoted name of the trigger
	release    string // quoted, qualified function releasing a shared holding
	renew      string // quoted, qualified function renewing a shared holding
	acquire    string // quoted, qualified function acquiring a shared holding
}

func newNames(schema, table string) names {
	return names{
		schema:     pgx.Identifier{schema}.Sanitize(),
		table:      pgx.Identifier{schema, table}.Sanitize(),
		sequence:   pgx.Identifier{schema, table + seqSuffix}.Sanitize(),
		index:      pgx.Identifier{table + indexSuffix}.Sanitize(),
		queue:      pgx.Identifier{schema, table + queueSuffix}.Sanitize(),
		queueIndex: pgx.Identifier{table + queueIndexSuffix}.Sanitize(),
		holds:      pgx.Identifier{schema, table + holdsSuffix}.Sanitize(),
		holdsIndex: pgx.Identifier{table + holdsIndexSuffix}.Sanitize(),
		keep:       pgx.Identifier{schema, table + keepSuffix}.Sanitize(),
		keepName:   pgx.Identifier{table + keepSuffix}.Sanitize(),
		release:    pgx.Identifier{schema, table + releaseSuffix}.Sanitize(),
		renew:      pgx.Identifier{schema, table + renewSuffix}.Sanitize(),
		acquire:    pgx.Identifier{schema, table + acquireSuffix}.Sanitize(),
	}
}

// ddl holds the statements that create, or upgrade, one lease table. Each is
// idempotent.
//
// The sequence is not OWNED BY the table, so that dropping and re-creating the
// table does not restart the tokens. Names use the "C" collation: comparison
// is by bytes, so "Foo" and "foo" are different leases under any database
// collation.
//
// attempt names the holding (backend.AcquireRequest.Attempt). Tables made
// before it existed get it through upgrade: the column is added with the
// empty string as default (so the rows already there read an empty attempt,
// which no request can name: they are never refreshed, renewed or released
// by this version and simply expire), then the default is dropped, so that an INSERT without an
// attempt (a process of the previous version) fails on NOT NULL instead of
// making a holding that this version could not tell apart.
//
// waited marks a holding that a refused attempt is waiting for: only its
// release is announced (NOTIFY). The upgrade adds it with default false, which
// it keeps (an INSERT that leaves it out makes an unmarked holding). A waiter
// of a version without the column marks nothing, so it wakes at the holder's
// expiry rather than at its release by a process of this version.
//
// The waiter queue (backend/queue.go) is a table of its own, named after the
// lease table with "_queue", one row per queued attempt: keyed by (name,
// attempt), ordered by place (an identity column: a later entry has a
// greater place), with the entry's owner, metadata (the holding's, once
// handed the name), notify address and the channel derived from it, pickup
// window (microseconds), latest poll number (QueueRequest.Poll, the same
// 64 bits as a bigint), expiry, and turn_started_at: when the head's turn
// began (the first acquire that found the name free with this entry at the
// head; NULL until then). The turn belongs to the entry, so it ends with it.
// The lease table is unchanged: installations of the previous version are
// upgraded by the CREATE TABLE IF NOT EXISTS of the queue and its index,
// which EnsureSchema (and CreateScript) run like the others. Processes of
// the previous version on an upgraded table neither queue nor hand on: they
// take free names regardless of the queue (fairness, not safety, is lost).
//
// holder_limit (lease table and queue; default 1, which the exclusive rows
// keep: no exclusive statement writes it) and the holds table, named after
// the lease table with "_holds", one row per holding of a name with several
// holders, keyed by (name, attempt), are the names with several holders
// (shared.go). The keep trigger ("_keep_shared", and its function of that
// name) makes the deletion of a live record (an empty attempt, holder_limit above
// 1) an error (an AFTER trigger whose WHEN compares only the attempt: the
// cheapest test for an exclusive row's deletion): only a process of an earlier version, whose revoke reads the
// record as a holding, ever tries it. The upgrade adds the columns (a
// table of the previous version then reads holder_limit 1 everywhere); the
// trigger is created when missing (CreateScript drops and re-creates it,
// PostgreSQL 12 having no CREATE OR REPLACE TRIGGER). The functions
// "_renew_shared" and "_release_shared" are the renewal and the release of
// a shared holding (queries.go), which the renew and release statements
// call only for a name that has a record; EnsureSchema replaces them when
// their text differs. Their bodies are dollar-quoted with a tag they do not
// contain (dollarQuote): the quoted names in them may contain dollars.
type ddl struct {
	create     []string // schema, sequence, table, queue, holds: CREATE ... IF NOT EXISTS
	upgrade    []string // adds attempt, waited and holder_limit to tables of an earlier version
	index      string
	queueIndex string
	holdsIndex string
	keep       []string   // the keep trigger and its function, (re)created
	functions  []function // the shared release, renewal and acquire
}

// function is one function of the schema: CREATE OR REPLACE, its signature
// (for to_regprocedure) and its body (as pg_proc.prosrc keeps it).
type function struct {
	create, sig, src string
}

func newDDL(schema, table string) ddl {
	n := newNames(schema, table)
	d := ddl{
		create: []string{
			"CREATE SCHEMA IF NOT EXISTS " + n.schema,
			"CREATE SEQUENCE IF NOT EXISTS " + n.sequence + " AS bigint MINVALUE 1 START WITH 1 CACHE 1 NO CYCLE",
			"CREATE TABLE IF NOT EXISTS " + n.table + ` (
    lease_name        text COLLATE "C" NOT NULL PRIMARY KEY CHECK (char_length(lease_name) BETWEEN 1 AND 200),
    owner_instance_id text COLLATE "C" NOT NULL CHECK (char_length(owner_instance_id) BETWEEN 1 AND 200),
    attempt           text COLLATE "C" NOT NULL CHECK (octet_length(attempt) <= 64),
    fencing_token     bigint NOT NULL CHECK (fencing_token > 0),
    acquired_at       timestamptz NOT NULL,
    renewed_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    metadata          text NOT NULL DEFAULT '' CHECK (octet_length(metadata) <= 4000),
    waited            boolean NOT NULL DEFAULT false,
    holder_limit      integer NOT NULL DEFAULT 1 CHECK (holder_limit BETWEEN 1 AND ` + maxLimitText + `)
)`,
			"CREATE TABLE IF NOT EXISTS " + n.queue + ` (
    lease_name        text COLLATE "C" NOT NULL CHECK (char_length(lease_name) BETWEEN 1 AND 200),
    attempt           text COLLATE "C" NOT NULL CHECK (octet_length(attempt) BETWEEN 1 AND 64),
    place             bigint GENERATED BY DEFAULT AS IDENTITY,
    owner_instance_id text COLLATE "C" NOT NULL CHECK (char_length(owner_instance_id) BETWEEN 1 AND 200),
    metadata          text NOT NULL DEFAULT '' CHECK (octet_length(metadata) <= 4000),
    notify_address    text COLLATE "C" NOT NULL DEFAULT '' CHECK (octet_length(notify_address) <= 64),
    notify_channel    text COLLATE "C" NOT NULL DEFAULT '' CHECK (octet_length(notify_channel) <= 63),
    pickup_us         bigint NOT NULL CHECK (pickup_us > 0),
    poll              bigint NOT NULL DEFAULT 0,
    expires_at        timestamptz NOT NULL,
    turn_started_at   timestamptz,
    holder_limit      integer NOT NULL DEFAULT 1 CHECK (holder_limit BETWEEN 1 AND ` + maxLimitText + `),
    PRIMARY KEY (lease_name, attempt),
    UNIQUE (lease_name, place)
)`,
			"CREATE TABLE IF NOT EXISTS " + n.holds + ` (
    lease_name        text COLLATE "C" NOT NULL CHECK (char_length(lease_name) BETWEEN 1 AND 200),
    attempt           text COLLATE "C" NOT NULL CHECK (octet_length(attempt) BETWEEN 1 AND 64),
    owner_instance_id text COLLATE "C" NOT NULL CHECK (char_length(owner_instance_id) BETWEEN 1 AND 200),
    fencing_token     bigint NOT NULL CHECK (fencing_token > 0),
    acquired_at       timestamptz NOT NULL,
    renewed_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    metadata          text NOT NULL DEFAULT '' CHECK (octet_length(metadata) <= 4000),
    PRIMARY KEY (lease_name, attempt)
)`,
		},
		upgrade: []string{
			"ALTER TABLE " + n.table + ` ADD COLUMN IF NOT EXISTS attempt text COLLATE "C" NOT NULL DEFAULT '' CHECK (octet_length(attempt) <= 64)`,
			"ALTER TABLE " + n.table + " ALTER COLUMN attempt DROP DEFAULT",
			"ALTER TABLE " + n.table + " ADD COLUMN IF NOT EXISTS waited boolean NOT NULL DEFAULT false",
			"ALTER TABLE " + n.table + " ADD COLUMN IF NOT EXISTS holder_limit integer NOT NULL DEFAULT 1 CHECK (holder_limit BETWEEN 1 AND " + maxLimitText + ")",
			"ALTER TABLE " + n.queue + " ADD COLUMN IF NOT EXISTS holder_limit integer NOT NULL DEFAULT 1 CHECK (holder_limit BETWEEN 1 AND " + maxLimitText + ")",
		},
		index:      "CREATE INDEX IF NOT EXISTS " + n.index + " ON " + n.table + " (expires_at)",
		queueIndex: "CREATE INDEX IF NOT EXISTS " + n.queueIndex + " ON " + n.queue + " (expires_at)",
		holdsIndex: "CREATE INDEX IF NOT EXISTS " + n.holdsIndex + " ON " + n.holds + " (expires_at)",
		keep: []string{
			// The body names no table: only constant text is dollar-quoted.
			"CREATE OR REPLACE FUNCTION " + n.keep + `() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.holder_limit > 1 AND OLD.expires_at > clock_timestamp() THEN
        RAISE EXCEPTION 'leasehold: lease % has several holders (limit %): this version of leasehold cannot end it',
            OLD.lease_name, OLD.holder_limit USING ERRCODE = '55000';
    END IF;
    RETURN NULL;
END
$$`,
			"DROP TRIGGER IF EXISTS " + n.keepName + " ON " + n.table,
			"CREATE TRIGGER " + n.keepName + " AFTER DELETE ON " + n.table + `
    FOR EACH ROW WHEN (OLD.attempt = '') EXECUTE FUNCTION ` + n.keep + "()",
		},
	}
	release, renew, acquire := sharedReleaseBody(n), sharedRenewBody(n), sharedAcquireBody(n)
	d.functions = []function{{
		create: "CREATE OR REPLACE FUNCTION " + n.release + `(key text, owner text, attempt text, token bigint, channel text)
    RETURNS bigint LANGUAGE sql VOLATILE AS ` + dollarQuote(release),
		sig: n.release + "(text, text, text, bigint, text)",
		src: release,
	}, {
		create: "CREATE OR REPLACE FUNCTION " + n.renew + `(key text, owner text, attempt text, token bigint, ttl_us bigint)
    RETURNS timestamptz LANGUAGE sql VOLATILE AS ` + dollarQuote(renew),
		sig: n.renew + "(text, text, text, bigint, bigint)",
		src: renew,
	}, {
		create: "CREATE OR REPLACE FUNCTION " + n.acquire + `(p_key text, p_owner text, p_attempt text, p_ttl_us bigint, p_metadata text,
    p_seq regclass, p_wait boolean, p_entry_ttl_us bigint, p_pickup_us bigint, p_notify text, p_channel text, p_poll bigint,
    p_limit integer, OUT o_acquired boolean, OUT o_token bigint, OUT o_expires timestamptz, OUT o_holder text,
    OUT o_left_us bigint, OUT o_queued boolean, OUT o_held_limit integer)
    LANGUAGE plpgsql VOLATILE AS ` + dollarQuote(acquire),
		sig: n.acquire + "(text, text, text, bigint, text, regclass, boolean, bigint, bigint, text, text, bigint, integer)",
		src: acquire,
	}}
	return d
}

// dollarQuote quotes body with a dollar tag that it does not contain (a
// table name could).
func dollarQuote(body string) string {
	tag := "$leasehold$"
	for i := 0; strings.Contains(body, tag); i++ {
		tag = "$leasehold" + strconv.Itoa(i) + "$"
	}
	return tag + body + tag
}

// maxLimitText is backend.MaxLimit in SQL, for the holder_limit checks.
var maxLimitText = strconv.Itoa(backend.MaxLimit)

// CreateScript returns the DDL that EnsureSchema runs, for deployments that
// create the table out of band. It also upgrades a table made by an earlier
// version (see the package documentation): the ALTER statements add the
// attempt, waited and holder_limit columns (on a new table they change
// nothing), the waiter queue's and the holds tables and their indexes are
// created when missing, and the keep trigger is (re)created. Unlike
// EnsureSchema, the script does not check that objects already there under
// these names are the right kind. Names are
// quoted, so any valid name is safe to embed. For an invalid name it returns
// only an SQL comment saying so (running it creates nothing).
func CreateScript(schema, table string) string {
	if err := ValidateTable(schema, table); err != nil {
		return "-- leasehold: cannot create the lease table: invalid schema or table name\n"
	}
	d := newDDL(schema, table)
	stmts := append(append(append([]string{}, d.create...), d.upgrade...), d.index, d.queueIndex, d.holdsIndex)
	stmts = append(stmts, d.keep...)
	for _, f := range d.functions {
		stmts = append(stmts, f.create)
	}
	return strings.Join(stmts, ";\n\n") + ";\n"
}

// ensureLockKey serialises concurrent EnsureSchema calls on one database, so
// that racing CREATE ... IF NOT EXISTS statements do not fail on the catalog's
// unique indexes.
const ensureLockKey int64 = 0x6c65617365686f6c // "leasehol"

// ErrSchemaConflict is returned (wrapped) by EnsureSchema when an object
// under one of the lease table's names is not what this package needs: a
// table or view where the sequence belongs, a sequence that may cycle, a view
// where the table belongs, a table without the lease columns (or, under the
// queue's or the holds table's name, without theirs), an index name taken by
// something else.
// Nothing is created or changed then.
var ErrSchemaConflict = errors.New("postgres: schema object in the way")

// ErrSchemaMissing is returned (wrapped, with the server's error) by a call
// that found no lease table: the tables are made by EnsureSchema or by
// applying CreateScript, before the first Acquire.
var ErrSchemaMissing = errors.New("postgres: the lease tables do not exist: run EnsureSchema (or apply CreateScript) first")

// undefinedTable is PostgreSQL's SQLSTATE for a relation that does not exist.
const undefinedTable = "42P01"

// schemaMissing wraps err with ErrSchemaMissing when the server said a table
// does not exist, keeping the server's error matchable with errors.As.
func schemaMissing(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == undefinedTable {
		return fmt.Errorf("%w: %w", ErrSchemaMissing, err)
	}
	return err
}

// EnsureSchema creates the schema, token sequence, table and index, the
// waiter queue's table and index, and the holds table, its index and the
// keep trigger, when they do not exist, upgrades tables made by an earlier
// version of this package (adds the attempt, waited and holder_limit
// columns, the queue, the holds table and the trigger), and leaves them
// alone otherwise. It checks that
// objects already there under these names are a usable sequence, tables and
// indexes (errors wrap ErrSchemaConflict). It is safe to call on every start and
// from several processes at once: the DDL runs in one transaction under an
// advisory lock, and an "already exists" race with DDL run outside it counts
// as success. A table that needs no upgrade is not locked (no ALTER is sent).
func EnsureSchema(ctx context.Context, pool *pgxpool.Pool, schema, table string) error {
	if err := ValidateTable(schema, table); err != nil {
		return err
	}
	var err error
	for range 3 {
		if err = ensureOnce(ctx, pool, schema, table); err == nil || !isDuplicateObject(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: ensure schema: %w", err)
	}
	return nil
}

func ensureOnce(ctx context.Context, pool *pgxpool.Pool, schema, table string) error {
	d := newDDL(schema, table)
	n := newNames(schema, table)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", ensureLockKey); err != nil {
			return err
		}
		for _, stmt := range d.create {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		if err := checkSequence(ctx, tx, schema, table+seqSuffix, n.sequence); err != nil {
			return err
		}
		upgrade, err := checkTable(ctx, tx, schema, table, n.table)
		if err != nil {
			return err
		}
		upgradeQueue, err := checkQueue(ctx, tx, schema, table+queueSuffix, n.queue)
		if err != nil {
			return err
		}
		if err := checkColumns(ctx, tx, schema, table+holdsSuffix, n.holds, holdsColumns, "the table of shared holdings"); err != nil {
			return err
		}
		if upgrade || upgradeQueue {
			for _, stmt := range d.upgrade {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return err
				}
			}
		}
		if _, err := tx.Exec(ctx, d.index); err != nil {
			return err
		}
		if err := checkIndex(ctx, tx, schema, table+indexSuffix, n.index, n.table); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, d.queueIndex); err != nil {
			return err
		}
		if err := checkIndex(ctx, tx, schema, table+queueIndexSuffix, n.queueIndex, n.queue); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, d.holdsIndex); err != nil {
			return err
		}
		if err := checkIndex(ctx, tx, schema, table+holdsIndexSuffix, n.holdsIndex, n.holds); err != nil {
			return err
		}
		var kept bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname = $2)",
			n.table, table+keepSuffix).Scan(&kept); err != nil {
			return err
		}
		if !kept {
			for _, stmt := range d.keep {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return err
				}
			}
		}
		for _, f := range d.functions {
			var src *string
			if err := tx.QueryRow(ctx, "SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($1)", f.sig).Scan(&src); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if src == nil || *src != f.src {
				if _, err := tx.Exec(ctx, f.create); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// relation returns the oid and kind (pg_class.relkind) of schema.name, or
// found false.
func relation(ctx context.Context, tx pgx.Tx, schema, name string) (oid uint32, kind string, found bool, err error) {
	err = tx.QueryRow(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c
JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = $1 AND c.relname = $2`, schema, name).Scan(&oid, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", false, nil
	}
	return oid, kind, err == nil, err
}

// kindNames spells pg_class.relkind for error messages.
var kindNames = map[string]string{
	"r": "table", "p": "partitioned table", "v": "view", "m": "materialized view",
	"S": "sequence", "i": "index", "I": "partitioned index", "f": "foreign table",
	"c": "composite type", "t": "TOAST table",
}

func kindName(k string) string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "relation of kind " + k
}

// checkSequence verifies that the token sequence is a sequence counting up
// without cycling: anything else would make nextval fail at every acquire, or
// hand out tokens that do not increase.
func checkSequence(ctx context.Context, tx pgx.Tx, schema, name, quoted string) error {
	oid, kind, found, err := relation(ctx, tx, schema, name)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: sequence %s is missing after CREATE SEQUENCE", ErrSchemaConflict, quoted)
	case kind != "S":
		return fmt.Errorf("%w: %s exists but is a %s, not a sequence (the fencing tokens are drawn from it): rename or drop it, or choose another table name",
			ErrSchemaConflict, quoted, kindName(kind))
	}
	var increment int64
	var cycle bool
	if err := tx.QueryRow(ctx, "SELECT seqincrement, seqcycle FROM pg_sequence WHERE seqrelid = $1", oid).Scan(&increment, &cycle); err != nil {
		return err
	}
	if increment <= 0 || cycle {
		return fmt.Errorf("%w: sequence %s has INCREMENT %d and CYCLE %v: fencing tokens need a positive increment and NO CYCLE",
			ErrSchemaConflict, quoted, increment, cycle)
	}
	return nil
}

// leaseColumns are the columns of a lease table of every version; attempt
// came later and is added by the upgrade.
var leaseColumns = []string{"lease_name", "owner_instance_id", "fencing_token", "acquired_at", "renewed_at", "expires_at", "metadata"}

// queueColumns are the columns of the waiter queue's table.
var queueColumns = []string{"lease_name", "attempt", "place", "owner_instance_id", "metadata", "notify_address",
	"notify_channel", "pickup_us", "poll", "expires_at", "turn_started_at"}

// checkTable verifies that the table is a lease table and reports whether it
// needs the upgrade: no attempt column yet, or one still carrying the default
// the upgrade gives it (an upgrade run half way, by hand), or no waited
// column.
func checkTable(ctx context.Context, tx pgx.Tx, schema, name, quoted string) (upgrade bool, err error) {
	cols, err := tableColumns(ctx, tx, schema, name, quoted)
	if err != nil {
		return false, err
	}
	for _, c := range leaseColumns {
		if _, ok := cols[c]; !ok {
			return false, fmt.Errorf("%w: table %s exists but has no column %s: it is not a lease table", ErrSchemaConflict, quoted, c)
		}
	}
	hasDefault, ok := cols["attempt"]
	_, waited := cols["waited"]
	_, limit := cols["holder_limit"]
	return !ok || hasDefault || !waited || !limit, nil
}

// checkQueue verifies that the waiter queue's name belongs to a table with
// the queue's columns (CREATE TABLE IF NOT EXISTS skips any relation of that
// name), and reports whether it needs the upgrade: no holder_limit column
// yet.
func checkQueue(ctx context.Context, tx pgx.Tx, schema, name, quoted string) (upgrade bool, err error) {
	cols, err := tableColumns(ctx, tx, schema, name, quoted)
	if err != nil {
		return false, err
	}
	for _, c := range queueColumns {
		if _, ok := cols[c]; !ok {
			return false, fmt.Errorf("%w: table %s exists but has no column %s: it is not a waiter queue", ErrSchemaConflict, quoted, c)
		}
	}
	_, limit := cols["holder_limit"]
	return !limit, nil
}

// holdsColumns are the columns of the table of shared holdings.
var holdsColumns = []string{"lease_name", "attempt", "owner_instance_id", "fencing_token", "acquired_at", "renewed_at", "expires_at", "metadata"}

// checkColumns verifies that name belongs to a table with the columns cols
// (what names the table's role in errors).
func checkColumns(ctx context.Context, tx pgx.Tx, schema, name, quoted string, want []string, what string) error {
	cols, err := tableColumns(ctx, tx, schema, name, quoted)
	if err != nil {
		return err
	}
	for _, c := range want {
		if _, ok := cols[c]; !ok {
			return fmt.Errorf("%w: table %s exists but has no column %s: it is not %s", ErrSchemaConflict, quoted, c, what)
		}
	}
	return nil
}

// tableColumns returns the columns of the table schema.name (column name ->
// has a default), or an error when it is missing or not a table.
func tableColumns(ctx context.Context, tx pgx.Tx, schema, name, quoted string) (map[string]bool, error) {
	oid, kind, found, err := relation(ctx, tx, schema, name)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("%w: table %s is missing after CREATE TABLE", ErrSchemaConflict, quoted)
	case kind != "r" && kind != "p":
		return nil, fmt.Errorf("%w: %s exists but is a %s, not a table", ErrSchemaConflict, quoted, kindName(kind))
	}
	cols := map[string]bool{}
	rows, err := tx.Query(ctx, "SELECT attname::text, atthasdef FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped", oid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var col string
		var hasDefault bool
		if err := rows.Scan(&col, &hasDefault); err != nil {
			return nil, err
		}
		cols[col] = hasDefault
	}
	return cols, rows.Err()
}

// checkIndex verifies that an expiry index's name belongs to an index on its
// table (CREATE INDEX IF NOT EXISTS skips any relation of that name).
func checkIndex(ctx context.Context, tx pgx.Tx, schema, name, quoted, table string) error {
	oid, kind, found, err := relation(ctx, tx, schema, name)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: index %s is missing after CREATE INDEX", ErrSchemaConflict, quoted)
	case kind != "i" && kind != "I":
		return fmt.Errorf("%w: %s exists but is a %s, not the expiry index of %s", ErrSchemaConflict, quoted, kindName(kind), table)
	}
	var onTable bool
	if err := tx.QueryRow(ctx, "SELECT indrelid = $2::regclass FROM pg_index WHERE indexrelid = $1", oid, table).Scan(&onTable); err != nil {
		return err
	}
	if !onTable {
		return fmt.Errorf("%w: index %s exists but is not on %s", ErrSchemaConflict, quoted, table)
	}
	return nil
}

// isDuplicateObject reports the errors of a CREATE ... IF NOT EXISTS that lost
// a race: unique_violation on a catalog, duplicate_table/schema/object.
func isDuplicateObject(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "23505", "42P06", "42P07", "42710":
		return true
	}
	return false
}
