package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// schemaVersion is the version of the tables this package makes, kept in the
// lease table's comment ("leasehold schema 1"): EnsureSchema and the shape
// check refuse a table of another version, so that a later version can
// upgrade its tables knowingly.
const schemaVersion = 1

const versionComment = "leasehold schema 1"

// ErrSchemaMismatch is returned (wrapped) by EnsureSchema when a table of
// the lease table's names exists but is not what this backend needs (another
// program's table, a column of another type, another schema version).
var ErrSchemaMismatch = errors.New("mysql: lease table has an incompatible shape")

// ErrInvalidIdentifier is returned (wrapped) for a schema or table name that
// ValidateTable rejects.
var ErrInvalidIdentifier = errors.New("mysql: invalid schema or table name")

// Suffixes of the tables beside the lease table.
const (
	holdsSuffix = "_holds"
	queueSuffix = "_queue"
)

// ValidateTable reports why schema (a MySQL database) and table cannot name
// a lease table: each must be 1 to 64 ASCII letters, digits and
// underscores (the table at most 58, leaving room for its suffixes), so
// that no quoting rule or lower_case_table_names setting changes them.
func ValidateTable(schema, table string) error {
	if err := checkIdentifier("schema", schema, 64); err != nil {
		return err
	}
	return checkIdentifier("table", table, 64-len(holdsSuffix))
}

func checkIdentifier(what, s string, max int) error {
	if s == "" || len(s) > max {
		return fmt.Errorf("%w: %s %q must be 1 to %d characters", ErrInvalidIdentifier, what, s, max)
	}
	for _, c := range s {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return fmt.Errorf("%w: %s %q may hold only ASCII letters, digits and underscores", ErrInvalidIdentifier, what, s)
		}
	}
	return nil
}

// names are the quoted names of a lease table and the tables beside it.
type names struct {
	schema, table string // unquoted
	db            string // `schema`
	leases        string // `schema`.`table`: one row per name in use, the name's lock
	holds         string // `schema`.`table_holds`: one row per holding
	queue         string // `schema`.`table_queue`: one row per queued attempt
}

func newNames(schema, table string) (names, error) {
	if err := ValidateTable(schema, table); err != nil {
		return names{}, err
	}
	q := func(t string) string { return "`" + schema + "`.`" + t + "`" }
	return names{schema: schema, table: table, db: "`" + schema + "`",
		leases: q(table), holds: q(table + holdsSuffix), queue: q(table + queueSuffix)}, nil
}

func (n names) String() string { return n.schema + "." + n.table }

// ddl returns the statements that create the database and the three tables
// when they are missing. Every text column is VARBINARY: comparisons are
// byte for byte, so "s" and "s " are two names, and "S" and "s" too, under
// any server or database collation. Times are microseconds since the Unix
// epoch on the server's UTC clock, so that no time zone or driver setting
// (parseTime) changes them.
//
// Tokens are the AUTO_INCREMENT key of the holds table: every grant inserts
// a row, so tokens increase over all names, hence over each, and a token is
// never drawn twice, since MySQL 8.0 and MariaDB 10.2.4 keep the counter
// durable across restarts (in the redo log) even when the rows are deleted.
func ddl(n names) []string {
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + n.db,
		"CREATE TABLE IF NOT EXISTS " + n.leases + ` (
    name VARBINARY(800) NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB COMMENT='` + versionComment + `'`,
		"CREATE TABLE IF NOT EXISTS " + n.holds + ` (
    token        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    name         VARBINARY(800)  NOT NULL,
    owner        VARBINARY(800)  NOT NULL,
    attempt      VARBINARY(64)   NOT NULL,
    holder_limit INT             NOT NULL,
    acquired_us  BIGINT          NOT NULL,
    expires_us   BIGINT          NOT NULL,
    renewals     BIGINT UNSIGNED NOT NULL DEFAULT 0,
    metadata     VARBINARY(4000) NOT NULL,
    PRIMARY KEY (token),
    KEY name_token (name, token),
    KEY expires (expires_us)
) ENGINE=InnoDB COMMENT='` + versionComment + `'`,
		"CREATE TABLE IF NOT EXISTS " + n.queue + ` (
    position     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    name         VARBINARY(800)  NOT NULL,
    owner        VARBINARY(800)  NOT NULL,
    attempt      VARBINARY(64)   NOT NULL,
    metadata     VARBINARY(4000) NOT NULL,
    notify       VARBINARY(64)   NOT NULL,
    holder_limit INT             NOT NULL,
    pickup_us    BIGINT          NOT NULL,
    poll         BIGINT UNSIGNED NOT NULL,
    expires_us   BIGINT          NOT NULL,
    turn_us      BIGINT          NULL,
    PRIMARY KEY (position),
    KEY name_position (name, position)
) ENGINE=InnoDB COMMENT='` + versionComment + `'`,
	}
}

// CreateScript returns the DDL that EnsureSchema runs, as a script for the
// mysql client, for people who deploy schema changes out of band. It is
// idempotent. For names that ValidateTable rejects it returns a script that
// fails with that error instead of creating anything.
func CreateScript(schema, table string) string {
	n, err := newNames(schema, table)
	if err != nil {
		return "-- leasehold: cannot create the lease table\nSIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" +
			strings.ReplaceAll(err.Error(), "'", "''") + "';\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- leasehold lease tables %s (MySQL 8.0+, MariaDB 10.6+)\n", n)
	for _, s := range ddl(n) {
		b.WriteString(s)
		b.WriteString(";\n")
	}
	return b.String()
}

// EnsureSchema creates the database schema and the lease table with its
// holds and queue tables when they are missing, and checks that they are
// what this backend needs (ErrSchemaMismatch otherwise). It first refuses a
// server that could lose acknowledged commits (ErrNotDurable) or that does
// not keep AUTO_INCREMENT counters across restarts (ErrServerVersion),
// touching nothing. It is idempotent and safe when several instances run it
// at once (CREATE ... IF NOT EXISTS). It needs CREATE on the database; the
// backend itself needs only SELECT, INSERT, UPDATE and DELETE on the tables.
func EnsureSchema(ctx context.Context, db *sql.DB, schema, table string) error {
	if db == nil {
		return errors.New("mysql: EnsureSchema: nil *sql.DB")
	}
	n, err := newNames(schema, table)
	if err != nil {
		return err
	}
	if err := checkServer(ctx, db); err != nil {
		return fmt.Errorf("mysql: EnsureSchema %s: %w", n, err)
	}
	for _, stmt := range ddl(n) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("mysql: EnsureSchema %s: %w", n, err)
		}
	}
	return checkShape(ctx, db, n)
}

// column is what checkShape requires of one column.
type column struct{ name, dataType string }

var (
	leasesColumns = []column{{"name", "varbinary"}}
	holdsColumns  = []column{{"token", "bigint"}, {"name", "varbinary"}, {"owner", "varbinary"}, {"attempt", "varbinary"},
		{"holder_limit", "int"}, {"acquired_us", "bigint"}, {"expires_us", "bigint"}, {"renewals", "bigint"}, {"metadata", "varbinary"}}
	queueColumns = []column{{"position", "bigint"}, {"name", "varbinary"}, {"owner", "varbinary"}, {"attempt", "varbinary"},
		{"metadata", "varbinary"}, {"notify", "varbinary"}, {"holder_limit", "int"}, {"pickup_us", "bigint"},
		{"poll", "bigint"}, {"expires_us", "bigint"}, {"turn_us", "bigint"}}
)

// checkShape returns ErrSchemaMismatch when a table lacks a column of the
// type this backend needs, is not InnoDB (whose row locks and durable
// AUTO_INCREMENT the backend relies on), or carries another schema version.
func checkShape(ctx context.Context, db *sql.DB, n names) error {
	for _, t := range []struct {
		table string
		cols  []column
	}{{n.table, leasesColumns}, {n.table + holdsSuffix, holdsColumns}, {n.table + queueSuffix, queueColumns}} {
		var engine, comment sql.NullString
		err := db.QueryRowContext(ctx, `SELECT ENGINE, TABLE_COMMENT FROM information_schema.TABLES
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, n.schema, t.table).Scan(&engine, &comment)
		if err != nil {
			return fmt.Errorf("mysql: checking table %s.%s: %w", n.schema, t.table, err)
		}
		if !strings.EqualFold(engine.String, "InnoDB") {
			return fmt.Errorf("%w: %s.%s uses engine %q, not InnoDB", ErrSchemaMismatch, n.schema, t.table, engine.String)
		}
		if comment.String != versionComment {
			return fmt.Errorf("%w: %s.%s is not a leasehold table of schema version %d (its comment is %q)", ErrSchemaMismatch, n.schema, t.table, schemaVersion, comment.String)
		}
		rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, n.schema, t.table)
		if err != nil {
			return fmt.Errorf("mysql: checking table %s.%s: %w", n.schema, t.table, err)
		}
		have := map[string]string{}
		for rows.Next() {
			var name, typ string
			if err := rows.Scan(&name, &typ); err != nil {
				rows.Close()
				return err
			}
			have[strings.ToLower(name)] = strings.ToLower(typ)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, c := range t.cols {
			if got, ok := have[c.name]; !ok || got != c.dataType {
				return fmt.Errorf("%w: %s.%s: column %s must be %s (found %q)", ErrSchemaMismatch, n.schema, t.table, c.name, c.dataType, got)
			}
		}
	}
	return nil
}
