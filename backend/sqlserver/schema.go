package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	mssql "github.com/microsoft/go-mssqldb"
)

// ErrSchemaMismatch is returned (wrapped) by EnsureSchema when the table
// exists but lacks a column or collation this backend needs (for example a
// table created by Aaravsoft.Distributed.Lease, which has no FencingToken).
var ErrSchemaMismatch = errors.New("sqlserver: lease table has an incompatible shape")

// binaryCollation is the collation of LeaseName and OwnerInstanceId: code
// point comparison, available on SQL Server 2008 and later and on Azure SQL.
const binaryCollation = "Latin1_General_100_BIN2"

// alreadyExists lists the errors a concurrent creator of the same object
// causes: 2714 "There is already an object named ...", 1913 "an index ...
// already exists", 2759 "CREATE SCHEMA failed due to previous errors".
var alreadyExists = []int32{2714, 1913, 2759}

// ddlStatements returns the statements that create the schema, sequence,
// table and index when they are missing. Each is its own batch. CREATE SCHEMA
// must be alone in its batch, hence sp_executesql.
func ddlStatements(n objectNames) []string {
	createSchema := "CREATE SCHEMA " + n.schemaQ
	return []string{
		fmt.Sprintf("IF SCHEMA_ID(%s) IS NULL\n    EXEC sys.sp_executesql %s;",
			quoteLiteral(n.schema), quoteLiteral(createSchema)),

		// The sequence makes tokens increase across release, expiry and the
		// sweep (which deletes rows). CACHE keeps NEXT VALUE FOR cheap; after
		// a crash the cached values are skipped, never reused.
		fmt.Sprintf("IF OBJECT_ID(%s, N'SO') IS NULL\n    CREATE SEQUENCE %s AS BIGINT START WITH 1 INCREMENT BY 1 MINVALUE 1 NO CYCLE CACHE 50;",
			quoteLiteral(n.sequenceQ), n.sequenceQ),

		fmt.Sprintf(`IF OBJECT_ID(%[1]s, N'U') IS NULL
    CREATE TABLE %[2]s (
        LeaseName       NVARCHAR(400)     COLLATE %[3]s NOT NULL,
        LeaseNameBytes  INT               NOT NULL,
        OwnerInstanceId NVARCHAR(400)     COLLATE %[3]s NOT NULL,
        FencingToken    BIGINT            NOT NULL,
        AcquiredAtUtc   DATETIMEOFFSET(7) NOT NULL,
        RenewedAtUtc    DATETIMEOFFSET(7) NOT NULL,
        ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL,
        Metadata        NVARCHAR(4000)    NULL,
        [RowVersion]    ROWVERSION        NOT NULL,
        CONSTRAINT %[4]s PRIMARY KEY CLUSTERED (LeaseName, LeaseNameBytes),
        CONSTRAINT %[5]s CHECK (LeaseNameBytes = DATALENGTH(LeaseName)),
        CONSTRAINT %[6]s CHECK (FencingToken > 0)
    );`, quoteLiteral(n.tableQ), n.tableQ, binaryCollation, n.pk, n.ckBytes, n.ckToken),

		fmt.Sprintf("IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(%s) AND name = %s)\n    CREATE NONCLUSTERED INDEX %s ON %s (ExpiresAtUtc);",
			quoteLiteral(n.tableQ), quoteLiteral(n.indexName), n.ixExpires, n.tableQ),
	}
}

// CreateScript returns the DDL that EnsureSchema runs, as a script of batches
// separated by GO (sqlcmd and SSMS syntax), for people who deploy schema
// changes out of band. It is idempotent. For names that CheckIdentifiers
// rejects it returns a script that raises that error instead of creating
// anything.
func CreateScript(schema, table string) string {
	n, err := newObjectNames(schema, table)
	if err != nil {
		return fmt.Sprintf("-- leasehold: cannot create the lease table\nTHROW 50000, %s, 1;\nGO\n", quoteLiteral(err.Error()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- leasehold lease table %s (SQL Server 2016+, Azure SQL)\n", n.tableQ)
	for _, s := range ddlStatements(n) {
		b.WriteString(s)
		b.WriteString("\nGO\n")
	}
	return b.String()
}

// EnsureSchema creates the schema, sequence, table and index of a lease table
// when they are missing, and checks that an existing table has the columns
// and collations this backend needs (ErrSchemaMismatch otherwise). It is
// idempotent and safe when several instances run it at once: an "already
// exists" error from a concurrent creator counts as success. It needs CREATE
// SCHEMA (when the schema is missing), CREATE SEQUENCE and CREATE TABLE
// permissions; the backend itself needs only SELECT, INSERT, UPDATE, DELETE
// on the table and UPDATE on the sequence.
func EnsureSchema(ctx context.Context, db *sql.DB, schema, table string) error {
	if db == nil {
		return errors.New("sqlserver: EnsureSchema: nil *sql.DB")
	}
	n, err := newObjectNames(schema, table)
	if err != nil {
		return err
	}
	for _, stmt := range ddlStatements(n) {
		if _, err := db.ExecContext(ctx, stmt); err != nil && !isAlreadyExists(err) {
			return fmt.Errorf("sqlserver: EnsureSchema %s: %w", n, err)
		}
	}
	return checkTableShape(ctx, db, n)
}

func isAlreadyExists(err error) bool {
	var me mssql.Error
	if !errors.As(err, &me) {
		return false
	}
	for _, e := range append([]mssql.Error{me}, me.All...) {
		if slices.Contains(alreadyExists, e.Number) {
			return true
		}
	}
	return false
}

// requiredColumns are the columns the queries use, with the collation the
// string columns need ("" for other types).
var requiredColumns = map[string]string{
	"LeaseName":       binaryCollation,
	"LeaseNameBytes":  "",
	"OwnerInstanceId": binaryCollation,
	"FencingToken":    "",
	"AcquiredAtUtc":   "",
	"RenewedAtUtc":    "",
	"ExpiresAtUtc":    "",
	"Metadata":        "",
	"RowVersion":      "",
}

// tableShapeSQL lists the columns of a table with their collations.
const tableShapeSQL = `SELECT c.name, COALESCE(c.collation_name, N'')
FROM sys.columns AS c
WHERE c.object_id = OBJECT_ID(@table);`

// checkTableShape reports ErrSchemaMismatch when a column is missing or a
// name column lacks a binary collation (which would make "Foo" and "foo" the
// same lease).
func checkTableShape(ctx context.Context, db *sql.DB, n objectNames) error {
	rows, err := db.QueryContext(ctx, tableShapeSQL, sql.Named("table", n.tableQ))
	if err != nil {
		return fmt.Errorf("sqlserver: EnsureSchema %s: reading columns: %w", n, err)
	}
	defer rows.Close()
	found := map[string]string{}
	for rows.Next() {
		var name, collation string
		if err := rows.Scan(&name, &collation); err != nil {
			return fmt.Errorf("sqlserver: EnsureSchema %s: reading columns: %w", n, err)
		}
		found[name] = collation
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlserver: EnsureSchema %s: reading columns: %w", n, err)
	}
	var problems []string
	for _, col := range slices.Sorted(maps.Keys(requiredColumns)) {
		collation, ok := found[col]
		switch want := requiredColumns[col]; {
		case !ok:
			problems = append(problems, "no column "+col)
		case want != "" && !strings.HasSuffix(strings.ToUpper(collation), "_BIN2"):
			problems = append(problems, fmt.Sprintf("column %s has collation %q, not a _BIN2 collation", col, collation))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrSchemaMismatch, n, strings.Join(problems, "; "))
	}
	return nil
}
