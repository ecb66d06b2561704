package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// schemaVersion is the version of the tables and procedures this package
// makes, kept in each table's comment ("leasehold schema 2"): EnsureSchema
// upgrades tables of version 1 (whose calls ran in Go, without procedures)
// and refuses any other version, so that a later version can upgrade its
// tables knowingly.
const schemaVersion = 2

const (
	versionComment  = "leasehold schema 2"
	version1Comment = "leasehold schema 1"
)

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
// mysql client (its DELIMITER lines delimit the procedures), for people who
// deploy schema changes out of band. It is idempotent, and upgrades tables
// of schema version 1 as EnsureSchema does; it replaces the procedures
// (DROP, then CREATE), so calls made in between fail and are retried. For names that ValidateTable rejects it returns a script that
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
	// The procedures are replaced, so that the script also upgrades the
	// procedures of an earlier run; calls fail (and are retried) while one
	// is missing.
	b.WriteString("DELIMITER //\n")
	procs := procedures(n)
	for _, name := range procedureNames(n) {
		fmt.Fprintf(&b, "DROP PROCEDURE IF EXISTS `%s`.`%s` //\n%s //\n", n.schema, name, procs[name])
	}
	b.WriteString("DELIMITER ;\n")
	for _, t := range []string{n.leases, n.holds, n.queue} {
		fmt.Fprintf(&b, "ALTER TABLE %s COMMENT = '%s';\n", t, versionComment)
	}
	return b.String()
}

// EnsureSchema creates the database schema and the lease table with its
// holds and queue tables when they are missing, and checks that they are
// what this backend needs (ErrSchemaMismatch otherwise). It first refuses a
// server that could lose acknowledged commits (ErrNotDurable) or that does
// not keep AUTO_INCREMENT counters across restarts (ErrServerVersion),
// touching nothing. It is idempotent and safe when several instances run it
// at once (CREATE ... IF NOT EXISTS). It upgrades tables of schema version
// 1 (see upgrade). It needs CREATE, ALTER and CREATE ROUTINE on the
// database; the backend itself needs SELECT, INSERT, UPDATE and DELETE on
// the tables and EXECUTE on the procedures (which run with the caller's
// privileges).
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
	if err := upgrade(ctx, db, n); err != nil {
		return err
	}
	return checkShape(ctx, db, n)
}

// upgrade brings tables of version 1 to version 2: it creates the
// procedures, then sets each table's comment to the new version. Each step
// is idempotent, so instances running it at once, or a run cut short, end
// in the same tables; tables of another version are left to checkShape to
// refuse. Backends of version 1 keep working on upgraded tables meanwhile:
// they lock a name's row as the procedures do.
func upgrade(ctx context.Context, db *sql.DB, n names) error {
	comments, err := tableComments(ctx, db, n)
	if err != nil {
		return err
	}
	for _, c := range comments {
		if c != versionComment && c != version1Comment {
			return nil // not ours to upgrade: checkShape says why
		}
	}
	if err := checkColumns(ctx, db, n); err != nil {
		return err
	}
	procs := procedures(n)
	for _, name := range procedureNames(n) {
		var found int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE'`, n.schema, name).Scan(&found); err != nil {
			return fmt.Errorf("mysql: EnsureSchema %s: %w", n, err)
		}
		if found > 0 {
			continue
		}
		if _, err := db.ExecContext(ctx, procs[name]); err != nil && !isAlreadyExists(err) {
			return fmt.Errorf("mysql: EnsureSchema %s: creating procedure %s: %w", n, name, err)
		}
	}
	for i, t := range []string{n.leases, n.holds, n.queue} {
		if comments[i] == versionComment {
			continue
		}
		if _, err := db.ExecContext(ctx, "ALTER TABLE "+t+" COMMENT = '"+versionComment+"'"); err != nil {
			return fmt.Errorf("mysql: EnsureSchema %s: %w", n, err)
		}
	}
	return nil
}

// isAlreadyExists reports a CREATE PROCEDURE that another instance ran
// first (ER_SP_ALREADY_EXISTS).
func isAlreadyExists(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && me.Number == 1304
}

// tableComments reads the comments of n's three tables.
func tableComments(ctx context.Context, db *sql.DB, n names) ([3]string, error) {
	var out [3]string
	for i, t := range []string{n.table, n.table + holdsSuffix, n.table + queueSuffix} {
		var c sql.NullString
		err := db.QueryRowContext(ctx, `SELECT TABLE_COMMENT FROM information_schema.TABLES
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, n.schema, t).Scan(&c)
		if err != nil {
			return out, fmt.Errorf("mysql: checking table %s.%s: %w", n.schema, t, err)
		}
		out[i] = c.String
	}
	return out, nil
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
// AUTO_INCREMENT the backend relies on), or carries another schema version,
// or when a procedure is missing.
func checkShape(ctx context.Context, db *sql.DB, n names) error {
	if err := checkTables(ctx, db, n, true); err != nil {
		return err
	}
	for _, name := range procedureNames(n) {
		var found int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE'`, n.schema, name).Scan(&found); err != nil {
			return fmt.Errorf("mysql: checking procedure %s.%s: %w", n.schema, name, err)
		}
		if found == 0 {
			return fmt.Errorf("%w: procedure %s.%s is missing", ErrSchemaMismatch, n.schema, name)
		}
	}
	return nil
}

// checkColumns is checkTables without the version check, for upgrade.
func checkColumns(ctx context.Context, db *sql.DB, n names) error {
	return checkTables(ctx, db, n, false)
}

// checkTables checks the engine, the columns and, when version is set, the
// schema version of n's tables.
func checkTables(ctx context.Context, db *sql.DB, n names, version bool) error {
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
		if version && comment.String != versionComment {
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
