package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// already exists", 2759 "CREATE SCHEMA failed due to previous errors", 2705
// "Column names in each table must be unique" (two upgrades at once). The
// object that exists is checked afterwards (checkObjects): an object of the
// same name but another kind is not mistaken for ours.
var alreadyExists = []int32{2714, 1913, 2759, 2705}

// attemptColumn is the AttemptId column after its name (%s: the default's
// constraint name): the attempt that made the holding, printable ASCII of at
// most 64 bytes. The default, an empty string (which no request can name),
// fills the rows of a table made by a version without the column: those
// holdings can then no longer be renewed or released by any attempt, and
// simply expire.
const attemptColumn = `NVARCHAR(64) COLLATE ` + binaryCollation + ` NOT NULL CONSTRAINT %s DEFAULT (N'')`

// ddlStatements returns the statements that create the schema, sequence,
// table and index when they are missing, add the AttemptId column to a
// table made by an earlier version, create the waiter queue's table and
// index when they are missing, and add what names with several holders
// need (shared.go): the HolderLimit columns, the holds table and its index,
// and the keep trigger. Each is its own batch. CREATE SCHEMA must
// be alone in its batch, hence sp_executesql.
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
        AttemptId       %[7]s,
        FencingToken    BIGINT            NOT NULL,
        AcquiredAtUtc   DATETIMEOFFSET(7) NOT NULL,
        RenewedAtUtc    DATETIMEOFFSET(7) NOT NULL,
        ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL,
        Metadata        NVARCHAR(4000)    NULL,
        [RowVersion]    ROWVERSION        NOT NULL,
        CONSTRAINT %[4]s PRIMARY KEY CLUSTERED (LeaseName, LeaseNameBytes),
        CONSTRAINT %[5]s CHECK (LeaseNameBytes = DATALENGTH(LeaseName)),
        CONSTRAINT %[6]s CHECK (FencingToken > 0)
    );`, quoteLiteral(n.tableQ), n.tableQ, binaryCollation, n.pk, n.ckBytes, n.ckToken, fmt.Sprintf(attemptColumn, n.dfAttempt)),

		// A table made before holdings had attempts gets the column; rows
		// already there get an empty string (see attemptColumn).
		fmt.Sprintf("IF COL_LENGTH(%s, N'AttemptId') IS NULL\n    ALTER TABLE %s ADD AttemptId %s;",
			quoteLiteral(n.tableQ), n.tableQ, fmt.Sprintf(attemptColumn, n.dfAttempt)),

		fmt.Sprintf("IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(%s) AND name = %s)\n    CREATE NONCLUSTERED INDEX %s ON %s (ExpiresAtUtc);",
			quoteLiteral(n.tableQ), quoteLiteral(n.indexName), n.ixExpires, n.tableQ),

		// The waiter queue (backend/queue.go), one row per queued attempt.
		// A table made by a version without the queue simply gets it here:
		// the lease table itself is unchanged. Position (IDENTITY) is the
		// order of arrival: inserts of one name are serialized by the lock
		// on its lease row, so they draw increasing values. The clustered key
		// (name, Position) makes "the head" a seek; it stays within the 900
		// bytes of a clustered key (800 + 4 + 8), which (name, AttemptId)
		// would not, so the attempt's uniqueness is a nonclustered
		// constraint (932 bytes, within the 1700 of SQL Server 2016).
		// TurnStartedAtUtc is the head's turn (set on the head entry only,
		// so a new head starts with none). PickupUs and Poll are the
		// attempt's latest QueueRequest.
		fmt.Sprintf(`IF OBJECT_ID(%[1]s, N'U') IS NULL
    CREATE TABLE %[2]s (
        LeaseName         NVARCHAR(400)     COLLATE %[3]s NOT NULL,
        LeaseNameBytes    INT               NOT NULL,
        Position          BIGINT            IDENTITY(1, 1) NOT NULL,
        AttemptId         NVARCHAR(64)      COLLATE %[3]s NOT NULL,
        OwnerInstanceId   NVARCHAR(400)     COLLATE %[3]s NOT NULL,
        Metadata          NVARCHAR(4000)    NULL,
        PickupUs          BIGINT            NOT NULL,
        Poll              BIGINT            NOT NULL,
        EnqueuedAtUtc     DATETIMEOFFSET(7) NOT NULL,
        EntryExpiresAtUtc DATETIMEOFFSET(7) NOT NULL,
        TurnStartedAtUtc  DATETIMEOFFSET(7) NULL,
        CONSTRAINT %[4]s PRIMARY KEY CLUSTERED (LeaseName, LeaseNameBytes, Position),
        CONSTRAINT %[5]s UNIQUE NONCLUSTERED (LeaseName, LeaseNameBytes, AttemptId),
        CONSTRAINT %[6]s CHECK (LeaseNameBytes = DATALENGTH(LeaseName))
    );`, quoteLiteral(n.queueQ), n.queueQ, binaryCollation, n.pkQueue, n.uqQueueAttempt, n.ckQueueBytes),

		// For the sweep of entries whose waiters are gone (sweepTemplate).
		fmt.Sprintf("IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(%s) AND name = %s)\n    CREATE NONCLUSTERED INDEX %s ON %s (EntryExpiresAtUtc);",
			quoteLiteral(n.queueQ), quoteLiteral(n.queueIndexName), n.ixQueueExpires, n.queueQ),

		// Names with several holders (shared.go). HolderLimit is 1 on every
		// exclusive row and entry (the default: no exclusive statement
		// writes it), so a table of an earlier version gets the columns
		// with the value its rows mean.
		fmt.Sprintf("IF COL_LENGTH(%s, N'HolderLimit') IS NULL\n    ALTER TABLE %s ADD HolderLimit %s;",
			quoteLiteral(n.tableQ), n.tableQ, fmt.Sprintf(limitColumn, n.dfLimit)),
		fmt.Sprintf("IF COL_LENGTH(%s, N'HolderLimit') IS NULL\n    ALTER TABLE %s ADD HolderLimit %s;",
			quoteLiteral(n.queueQ), n.queueQ, fmt.Sprintf(limitColumn, n.dfQueueLimit)),

		// One row per holding of a name with several holders. The clustered
		// key (name, FencingToken) stays within 900 bytes and orders a
		// name's holdings by token (Holders); an attempt has one holding
		// per name (a nonclustered constraint, as the queue's).
		fmt.Sprintf(`IF OBJECT_ID(%[1]s, N'U') IS NULL
    CREATE TABLE %[2]s (
        LeaseName       NVARCHAR(400)     COLLATE %[3]s NOT NULL,
        LeaseNameBytes  INT               NOT NULL,
        AttemptId       NVARCHAR(64)      COLLATE %[3]s NOT NULL,
        OwnerInstanceId NVARCHAR(400)     COLLATE %[3]s NOT NULL,
        FencingToken    BIGINT            NOT NULL,
        AcquiredAtUtc   DATETIMEOFFSET(7) NOT NULL,
        RenewedAtUtc    DATETIMEOFFSET(7) NOT NULL,
        ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL,
        Metadata        NVARCHAR(4000)    NULL,
        CONSTRAINT %[4]s PRIMARY KEY CLUSTERED (LeaseName, LeaseNameBytes, FencingToken),
        CONSTRAINT %[5]s UNIQUE NONCLUSTERED (LeaseName, LeaseNameBytes, AttemptId),
        CONSTRAINT %[6]s CHECK (LeaseNameBytes = DATALENGTH(LeaseName))
    );`, quoteLiteral(n.holdsQ), n.holdsQ, binaryCollation, n.pkHolds, n.uqHoldsAttempt, n.ckHoldsBytes),

		// For the sweep of expired holdings.
		fmt.Sprintf("IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(%s) AND name = %s)\n    CREATE NONCLUSTERED INDEX %s ON %s (ExpiresAtUtc);",
			quoteLiteral(n.holdsQ), quoteLiteral(n.holdsIndexName), n.ixHoldsExpires, n.holdsQ),

		// The keep trigger (keepTriggerBody). CREATE TRIGGER must be alone
		// in its batch, hence sp_executesql.
		fmt.Sprintf("IF OBJECT_ID(%s, N'TR') IS NULL\n    EXEC sys.sp_executesql %s;",
			quoteLiteral(n.keepQ), quoteLiteral(keepTrigger(n))),
	}
}

// limitColumn is the HolderLimit column after its name (%s: the default's
// constraint name).
const limitColumn = `INT NOT NULL CONSTRAINT %s DEFAULT (1)`

// keepTrigger is the CREATE TRIGGER of the keep trigger. A version of this
// package without the holds table reads a name's record (shared.go) as a
// live holding: it never grants, renews or releases it, but its revoke
// would end it (delete it, or hand it on by rewriting it as an exclusive
// holding) and so free the name under its holders. The trigger makes that
// an error, which rolls the revoke back: it refuses any statement that
// deletes a live record or turns one into another kind of row. This
// version never does either (it lets a record expire instead). The first
// test, on the attempt alone, is all an exclusive statement pays.
func keepTrigger(n objectNames) string {
	return "CREATE TRIGGER " + n.keepQ + " ON " + n.tableQ + ` AFTER UPDATE, DELETE AS
BEGIN
    SET NOCOUNT ON;
    IF EXISTS (SELECT 1 FROM deleted WHERE AttemptId = N'')
       AND EXISTS (SELECT 1 FROM deleted AS d
                   WHERE d.AttemptId = N'' AND d.HolderLimit > 1 AND d.ExpiresAtUtc > SYSDATETIMEOFFSET()
                     AND NOT EXISTS (SELECT 1 FROM inserted AS i
                                     WHERE i.LeaseName = d.LeaseName AND i.LeaseNameBytes = d.LeaseNameBytes
                                       AND i.AttemptId = N'' AND i.HolderLimit > 1))
    BEGIN
        THROW 50102, N'leasehold: a lease with several holders cannot be ended by this version of leasehold', 1;
    END;
END;`
}

// CreateScript returns the DDL that EnsureSchema runs, as a script of batches
// separated by GO (sqlcmd and SSMS syntax), for people who deploy schema
// changes out of band. It is idempotent. For names that ValidateTable
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

// EnsureSchema creates the schema, sequence, table and index of a lease table,
// its waiter queue's and its holds table with their indexes, and the keep
// trigger when they are missing, adds the AttemptId and HolderLimit columns
// to tables made by an earlier version, and checks that
// the tables and sequence are what this backend needs (ErrSchemaMismatch
// otherwise, for example when an object with the sequence's name is not a
// sequence). It first refuses a database with
// DELAYED_DURABILITY = FORCED (ErrDelayedDurability), touching nothing. It is
// idempotent and safe when several instances run it at once: an "already
// exists" error from a concurrent creator counts as success. It needs CREATE
// SCHEMA (when the schema is missing), CREATE SEQUENCE, CREATE TABLE and
// ALTER on the table (for the upgrade and the keep trigger); the backend
// itself needs only SELECT, INSERT, UPDATE, DELETE on the three tables and
// UPDATE on the sequence.
func EnsureSchema(ctx context.Context, db *sql.DB, schema, table string) error {
	if db == nil {
		return errors.New("sqlserver: EnsureSchema: nil *sql.DB")
	}
	n, err := newObjectNames(schema, table)
	if err != nil {
		return err
	}
	if err := checkDurability(ctx, db); err != nil {
		return fmt.Errorf("sqlserver: EnsureSchema %s: %w", n, err)
	}
	for _, stmt := range ddlStatements(n) {
		if err := execDDL(ctx, db, stmt); err != nil {
			return fmt.Errorf("sqlserver: EnsureSchema %s: %w", n, err)
		}
	}
	if err := checkObjects(ctx, db, n); err != nil {
		return err
	}
	if err := checkTableShape(ctx, db, n, n.tableQ, requiredColumns); err != nil {
		return err
	}
	if err := checkTableShape(ctx, db, n, n.queueQ, requiredQueueColumns); err != nil {
		return err
	}
	return checkTableShape(ctx, db, n, n.holdsQ, requiredHoldsColumns)
}

func isAlreadyExists(err error) bool { return hasErrorNumber(err, alreadyExists...) }

// execDDL runs one guarded DDL batch (IF the object is missing, CREATE it).
// A concurrent creator makes it fail: SQL Server says so with the numbers of
// alreadyExists, other engines with their own (Babelfish for PostgreSQL: 219
// "type already exists", or 2627 on its catalog's unique index). So any
// other failure runs the batch once more: if the object now exists, its guard
// skips the CREATE and it succeeds; a real fault (a missing permission, a
// refused type) fails again and is returned.
func execDDL(ctx context.Context, db *sql.DB, stmt string) error {
	_, err := db.ExecContext(ctx, stmt)
	if err == nil || isAlreadyExists(err) {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	if _, again := db.ExecContext(ctx, stmt); again == nil || isAlreadyExists(again) {
		return nil
	}
	if strings.Contains(err.Error(), "escape_hatch_rowversion") {
		return fmt.Errorf("%w: %w", ErrRowVersionRefused, err)
	}
	return err
}

// durabilitySQL reads the delayed durability setting of the current database
// (DISABLED, ALLOWED or FORCED), which is always visible to its users.
const durabilitySQL = `SELECT delayed_durability_desc FROM sys.databases WHERE database_id = DB_ID();`

// checkDurability returns ErrDelayedDurability when the database forces
// delayed durability. ALLOWED is fine: only transactions that ask for delayed
// durability get it, and the backend's never do.
//
// An engine without delayed durability may report NULL (Babelfish for
// PostgreSQL does): nothing is delayed there either.
func checkDurability(ctx context.Context, db *sql.DB) error {
	var setting sql.NullString
	if err := db.QueryRowContext(ctx, durabilitySQL).Scan(&setting); err != nil {
		return fmt.Errorf("reading the database's delayed durability setting: %w", err)
	}
	if strings.EqualFold(setting.String, "FORCED") {
		return fmt.Errorf("%w; run ALTER DATABASE ... SET DELAYED_DURABILITY = DISABLED", ErrDelayedDurability)
	}
	return nil
}

// objectsSQL reports what kind of object (sys.objects.type_desc, or an empty
// string when there is none) holds the table's name, the sequence's name and
// the queue table's name.
const objectsSQL = `SELECT COALESCE((SELECT o.type_desc FROM sys.objects AS o WHERE o.object_id = OBJECT_ID(@table)), N''),
       COALESCE((SELECT o.type_desc FROM sys.objects AS o WHERE o.object_id = OBJECT_ID(@sequence)), N''),
       COALESCE((SELECT o.type_desc FROM sys.objects AS o WHERE o.object_id = OBJECT_ID(@queue)), N'');`

// checkObjects reports ErrSchemaMismatch when the table's or the sequence's
// name belongs to another kind of object. The DDL looks for an object of the
// right kind (OBJECT_ID(name, kind)); one of another kind with the same name
// makes CREATE fail with "There is already an object named ...", which
// EnsureSchema takes for a concurrent creator's success. Without this check a
// table or view named like the sequence would pass, and only the first
// acquire would fail.
func checkObjects(ctx context.Context, db *sql.DB, n objectNames) error {
	var table, sequence, queue string
	err := db.QueryRowContext(ctx, objectsSQL, sql.Named("table", n.tableQ), sql.Named("sequence", n.sequenceQ), sql.Named("queue", n.queueQ)).
		Scan(&table, &sequence, &queue)
	if err != nil {
		return fmt.Errorf("sqlserver: EnsureSchema %s: reading objects: %w", n, err)
	}
	var problems []string
	if table != "USER_TABLE" {
		problems = append(problems, fmt.Sprintf("%s is %s, not a table", n.tableQ, kindOf(table)))
	}
	if sequence != "SEQUENCE_OBJECT" {
		problems = append(problems, fmt.Sprintf("%s is %s, not a sequence", n.sequenceQ, kindOf(sequence)))
	}
	if queue != "USER_TABLE" {
		problems = append(problems, fmt.Sprintf("%s is %s, not a table", n.queueQ, kindOf(queue)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrSchemaMismatch, strings.Join(problems, "; "))
	}
	return checkKeepTrigger(ctx, db, n)
}

// keepTriggerSQL reports what kind of object holds the keep trigger's name
// and, when it is a trigger, whether it is an enabled AFTER trigger of the
// lease table (1) or not (0).
const keepTriggerSQL = `SELECT COALESCE((SELECT o.type_desc FROM sys.objects AS o WHERE o.object_id = OBJECT_ID(@keep)), N''),
       COALESCE((SELECT CAST(CASE WHEN t.parent_id = OBJECT_ID(@table) THEN 1 ELSE 0 END AS INT) FROM sys.triggers AS t WHERE t.object_id = OBJECT_ID(@keep)), 0),
       COALESCE((SELECT CAST(CASE WHEN t.is_instead_of_trigger = 0 AND t.is_disabled = 0 THEN 1 ELSE 0 END AS INT) FROM sys.triggers AS t WHERE t.object_id = OBJECT_ID(@keep)), 0);`

// checkKeepTrigger reports ErrSchemaMismatch unless the keep trigger's name
// is an enabled AFTER trigger on the lease table: the DDL creates it only
// when no trigger has the name, and takes "already an object named" for a
// concurrent creator's success, so an unrelated object of that name would
// otherwise leave names with several holders unguarded.
func checkKeepTrigger(ctx context.Context, db *sql.DB, n objectNames) error {
	var (
		kind            string
		onTable, active int64
	)
	err := db.QueryRowContext(ctx, keepTriggerSQL, sql.Named("keep", n.keepQ), sql.Named("table", n.tableQ)).Scan(&kind, &onTable, &active)
	if err != nil {
		return fmt.Errorf("sqlserver: EnsureSchema %s: reading the keep trigger: %w", n, err)
	}
	switch {
	case kind != "SQL_TRIGGER":
		return fmt.Errorf("%w: %s is %s, not the keep trigger (drop or rename it)", ErrSchemaMismatch, n.keepQ, kindOf(kind))
	case onTable != 1:
		return fmt.Errorf("%w: trigger %s is not on %s (drop or rename it)", ErrSchemaMismatch, n.keepQ, n.tableQ)
	case active != 1:
		return fmt.Errorf("%w: trigger %s on %s is disabled or INSTEAD OF; it must be an enabled AFTER UPDATE, DELETE trigger", ErrSchemaMismatch, n.keepQ, n.tableQ)
	}
	return nil
}

func kindOf(typeDesc string) string {
	if typeDesc == "" {
		return "missing"
	}
	return "a " + typeDesc
}

// requiredColumns are the columns the queries use, with the collation the
// string columns need ("" for other types).
var requiredColumns = map[string]string{
	"LeaseName":       binaryCollation,
	"LeaseNameBytes":  "",
	"OwnerInstanceId": binaryCollation,
	"AttemptId":       binaryCollation,
	"FencingToken":    "",
	"AcquiredAtUtc":   "",
	"RenewedAtUtc":    "",
	"ExpiresAtUtc":    "",
	"Metadata":        "",
	"RowVersion":      "",
	"HolderLimit":     "",
}

// requiredQueueColumns are the columns of the queue table, as above.
var requiredQueueColumns = map[string]string{
	"LeaseName":         binaryCollation,
	"LeaseNameBytes":    "",
	"Position":          "",
	"AttemptId":         binaryCollation,
	"OwnerInstanceId":   binaryCollation,
	"Metadata":          "",
	"PickupUs":          "",
	"Poll":              "",
	"EnqueuedAtUtc":     "",
	"EntryExpiresAtUtc": "",
	"TurnStartedAtUtc":  "",
	"HolderLimit":       "",
}

// requiredHoldsColumns are the columns of the holds table, as above.
var requiredHoldsColumns = map[string]string{
	"LeaseName":       binaryCollation,
	"LeaseNameBytes":  "",
	"AttemptId":       binaryCollation,
	"OwnerInstanceId": binaryCollation,
	"FencingToken":    "",
	"AcquiredAtUtc":   "",
	"RenewedAtUtc":    "",
	"ExpiresAtUtc":    "",
	"Metadata":        "",
}

// tableShapeSQL lists the columns of a table with their collations.
const tableShapeSQL = `SELECT c.name, COALESCE(c.collation_name, N'')
FROM sys.columns AS c
WHERE c.object_id = OBJECT_ID(@table);`

// checkTableShape reports ErrSchemaMismatch when a column of required is
// missing from table (n's lease or queue table) or a name column lacks a
// binary collation (which would make "Foo" and "foo" the same lease).
func checkTableShape(ctx context.Context, db *sql.DB, n objectNames, table string, required map[string]string) error {
	rows, err := db.QueryContext(ctx, tableShapeSQL, sql.Named("table", table))
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
		found[strings.ToLower(name)] = collation
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlserver: EnsureSchema %s: reading columns: %w", n, err)
	}
	var problems []string
	for _, col := range slices.Sorted(maps.Keys(required)) {
		collation, ok := found[strings.ToLower(col)] // identifiers are case-insensitive; some engines fold them
		switch want := required[col]; {
		case !ok:
			problems = append(problems, "no column "+col)
		case want != "" && !strings.HasSuffix(strings.ToUpper(collation), "_BIN2"):
			problems = append(problems, fmt.Sprintf("column %s has collation %q, not a _BIN2 collation", col, collation))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrSchemaMismatch, table, strings.Join(problems, "; "))
	}
	return nil
}
