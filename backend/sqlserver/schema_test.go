package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
	mssql "github.com/microsoft/go-mssqldb"
)

func TestCreateScriptDefaultTable(t *testing.T) {
	s := CreateScript("lease", "Leases")
	for _, want := range []string{
		"IF SCHEMA_ID(N'lease') IS NULL\n    EXEC sys.sp_executesql N'CREATE SCHEMA [lease]';\nGO\n",
		"IF OBJECT_ID(N'[lease].[Leases_FencingToken]', N'SO') IS NULL\n    CREATE SEQUENCE [lease].[Leases_FencingToken] AS BIGINT START WITH 1 INCREMENT BY 1 MINVALUE 1 NO CYCLE CACHE 50;\nGO\n",
		"IF OBJECT_ID(N'[lease].[Leases]', N'U') IS NULL\n    CREATE TABLE [lease].[Leases] (",
		"LeaseName       NVARCHAR(400)     COLLATE Latin1_General_100_BIN2 NOT NULL,",
		"OwnerInstanceId NVARCHAR(400)     COLLATE Latin1_General_100_BIN2 NOT NULL,",
		"AttemptId       NVARCHAR(64) COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT [DF_Leases_AttemptId] DEFAULT (N''),",
		// The upgrade of a table made by the previous version: idempotent,
		// a no-op on a table that has the column.
		"IF COL_LENGTH(N'[lease].[Leases]', N'AttemptId') IS NULL\n    ALTER TABLE [lease].[Leases] ADD AttemptId NVARCHAR(64) COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT [DF_Leases_AttemptId] DEFAULT (N'');\nGO\n",
		"FencingToken    BIGINT            NOT NULL,",
		"ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL,",
		"Metadata        NVARCHAR(4000)    NULL,",
		"[RowVersion]    ROWVERSION        NOT NULL,",
		"CONSTRAINT [PK_Leases] PRIMARY KEY CLUSTERED (LeaseName, LeaseNameBytes),",
		"CONSTRAINT [CK_Leases_LeaseNameBytes] CHECK (LeaseNameBytes = DATALENGTH(LeaseName)),",
		"CREATE NONCLUSTERED INDEX [IX_Leases_ExpiresAtUtc] ON [lease].[Leases] (ExpiresAtUtc);\nGO\n",
		// The waiter queue: created when missing, which is also the upgrade
		// of an installation made by a version without it.
		"IF OBJECT_ID(N'[lease].[Leases_Queue]', N'U') IS NULL\n    CREATE TABLE [lease].[Leases_Queue] (",
		"LeaseName         NVARCHAR(400)     COLLATE Latin1_General_100_BIN2 NOT NULL,",
		"Position          BIGINT            IDENTITY(1, 1) NOT NULL,",
		"AttemptId         NVARCHAR(64)      COLLATE Latin1_General_100_BIN2 NOT NULL,",
		"OwnerInstanceId   NVARCHAR(400)     COLLATE Latin1_General_100_BIN2 NOT NULL,",
		"PickupUs          BIGINT            NOT NULL,",
		"Poll              BIGINT            NOT NULL,",
		"EntryExpiresAtUtc DATETIMEOFFSET(7) NOT NULL,",
		"TurnStartedAtUtc  DATETIMEOFFSET(7) NULL,",
		"CONSTRAINT [PK_Leases_Queue] PRIMARY KEY CLUSTERED (LeaseName, LeaseNameBytes, Position),",
		"CONSTRAINT [UQ_Leases_QueueAttempt] UNIQUE NONCLUSTERED (LeaseName, LeaseNameBytes, AttemptId),",
		"CONSTRAINT [CK_Leases_QueueBytes] CHECK (LeaseNameBytes = DATALENGTH(LeaseName))",
		"IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'[lease].[Leases_Queue]') AND name = N'IX_Leases_QueueExpires')\n    CREATE NONCLUSTERED INDEX [IX_Leases_QueueExpires] ON [lease].[Leases_Queue] (EntryExpiresAtUtc);\nGO\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("CreateScript lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "\nGO\n"); n != 12 {
		t.Errorf("%d batches, want 12", n)
	}
}

// TestCreateScriptHostileNames checks that brackets, quotes, semicolons and
// comment markers in names stay inside bracket-quoted identifiers and
// doubled-quote literals.
func TestCreateScriptHostileNames(t *testing.T) {
	s := CreateScript("x]; DROP TABLE y; --", "t'; /*")
	for _, want := range []string{
		"IF SCHEMA_ID(N'x]; DROP TABLE y; --') IS NULL",
		"EXEC sys.sp_executesql N'CREATE SCHEMA [x]]; DROP TABLE y; --]';",
		"IF OBJECT_ID(N'[x]]; DROP TABLE y; --].[t''; /*]', N'U') IS NULL",
		"CREATE TABLE [x]]; DROP TABLE y; --].[t'; /*] (",
		"IF OBJECT_ID(N'[x]]; DROP TABLE y; --].[t''; /*_Queue]', N'U') IS NULL",
		"CREATE TABLE [x]]; DROP TABLE y; --].[t'; /*_Queue] (",
		"CONSTRAINT [UQ_t'; /*_QueueAttempt] UNIQUE NONCLUSTERED",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("CreateScript lacks %q:\n%s", want, s)
		}
	}
	checkWellFormed(t, "CreateScript", strings.ReplaceAll(s, "GO\n", ""), map[string]bool{})
}

func TestCreateScriptRejectedNames(t *testing.T) {
	s := CreateScript("lease", "bad\x00name")
	if !strings.HasPrefix(s, "-- leasehold: cannot create the lease table\nTHROW 50000, N'") || strings.Contains(s, "CREATE TABLE") {
		t.Errorf("CreateScript of an invalid name should only raise an error:\n%s", s)
	}
}

func TestValidateTable(t *testing.T) {
	ok := []struct{ schema, table string }{
		{"lease", "Leases"},
		{"dbo", "weird ]name[ with 'quotes'; -- and /* comments */"},
		{"ユニコード", "テーブル"},
		{strings.Repeat("s", 128), strings.Repeat("t", 110)},
	}
	for _, c := range ok {
		if err := ValidateTable(c.schema, c.table); err != nil {
			t.Errorf("ValidateTable(%q, %q) = %v", c.schema, c.table, err)
		}
	}
	bad := []struct{ schema, table string }{
		{"", "t"},
		{"s", ""},
		{"s", "t\x00"},
		{"s", "t\n"},
		{"s", " t"},
		{"s", "t "},
		{"s", "\xff"},
		{strings.Repeat("s", 129), "t"},
		{"s", strings.Repeat("t", 111)}, // CK_t_LeaseNameBytes would be 129 units
		{"s", strings.Repeat("😀", 56)},  // 112 UTF-16 units
		{"s", "a\u200bb\u0007"},         // BEL is a control character
	}
	for _, c := range bad {
		err := ValidateTable(c.schema, c.table)
		if !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("ValidateTable(%q, %q) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
		if _, err := New(&sql.DB{}, WithTable(c.schema, c.table)); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("New(WithTable(%q, %q)) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
	}
}

// expectDurability expects the durability check, answering setting.
func expectDurability(mock sqlmock.Sqlmock, setting string) {
	mock.ExpectQuery(durabilitySQL).WithoutArgs().WillReturnRows(sqlmock.NewRows([]string{"delayed_durability_desc"}).AddRow(setting))
}

// expectObjects expects the object kind check, answering the kinds of the
// table's, the sequence's and the queue table's names.
func expectObjects(mock sqlmock.Sqlmock, n objectNames, table, sequence, queue string) {
	mock.ExpectQuery(objectsSQL).WithArgs(sql.Named("table", n.tableQ), sql.Named("sequence", n.sequenceQ), sql.Named("queue", n.queueQ)).
		WillReturnRows(sqlmock.NewRows([]string{"table", "sequence", "queue"}).AddRow(table, sequence, queue))
	if table == "USER_TABLE" && sequence == "SEQUENCE_OBJECT" && queue == "USER_TABLE" {
		expectKeepTrigger(mock, n, "SQL_TRIGGER", 1, 1)
	}
}

// expectKeepTrigger expects the keep trigger check, answering its kind,
// whether it is on the lease table and whether it is an enabled AFTER
// trigger.
func expectKeepTrigger(mock sqlmock.Sqlmock, n objectNames, kind string, onTable, active int64) {
	mock.ExpectQuery(keepTriggerSQL).WithArgs(sql.Named("keep", n.keepQ), sql.Named("table", n.tableQ)).
		WillReturnRows(sqlmock.NewRows([]string{"kind", "on_table", "active"}).AddRow(kind, onTable, active))
}

// TestEnsureSchemaRefusesAForeignKeepTrigger: an object that holds the keep
// trigger's name but is not an enabled AFTER trigger of the lease table
// (which makes the trigger's CREATE fail with "already an object named",
// taken as success) is refused with ErrSchemaMismatch naming it.
func TestEnsureSchemaRefusesAForeignKeepTrigger(t *testing.T) {
	n := mustNames(t, DefaultSchema, DefaultTable)
	for _, tc := range []struct {
		kind            string
		onTable, active int64
		want            string
	}{
		{"USER_TABLE", 0, 0, "is a USER_TABLE, not the keep trigger"},
		{"SQL_STORED_PROCEDURE", 0, 0, "not the keep trigger"},
		{"SQL_TRIGGER", 0, 1, "is not on " + n.tableQ},
		{"SQL_TRIGGER", 1, 0, "disabled or INSTEAD OF"},
	} {
		db, mock := newMockDB(t)
		expectDurability(mock, "DISABLED")
		for _, stmt := range ddlStatements(n) {
			mock.ExpectExec(stmt).WillReturnResult(sqlmock.NewResult(0, 0))
		}
		mock.ExpectQuery(objectsSQL).WithArgs(sql.Named("table", n.tableQ), sql.Named("sequence", n.sequenceQ), sql.Named("queue", n.queueQ)).
			WillReturnRows(sqlmock.NewRows([]string{"table", "sequence", "queue"}).AddRow("USER_TABLE", "SEQUENCE_OBJECT", "USER_TABLE"))
		expectKeepTrigger(mock, n, tc.kind, tc.onTable, tc.active)
		err := EnsureSchema(context.Background(), db, DefaultSchema, DefaultTable)
		if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), n.keepQ) {
			t.Errorf("EnsureSchema with %s (on table %d, active %d) = %v; want ErrSchemaMismatch saying %q", tc.kind, tc.onTable, tc.active, err, tc.want)
		}
	}
}

// expectShapes expects the column checks of the lease table and then the
// queue table, answering their columns with the overrides of shapeRows
// (nil: the right shape).
func expectShapes(mock sqlmock.Sqlmock, n objectNames, table, queue map[string]string) {
	mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", n.tableQ)).WillReturnRows(shapeRows(requiredColumns, table))
	mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", n.queueQ)).WillReturnRows(shapeRows(requiredQueueColumns, queue))
	if queue == nil { // a queue of the wrong shape ends the checks
		mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", n.holdsQ)).WillReturnRows(shapeRows(requiredHoldsColumns, nil))
	}
}

// expectDDL expects the durability check and the DDL batches; fail,
// when not nil, answers the batch at that index with an error.
func expectDDL(mock sqlmock.Sqlmock, n objectNames, failAt int, fail error) {
	expectDurability(mock, "DISABLED")
	for i, stmt := range ddlStatements(n) {
		e := mock.ExpectExec(stmt).WithoutArgs()
		if i == failAt {
			e.WillReturnError(fail)
			if !isAlreadyExists(fail) {
				return
			}
			continue
		}
		e.WillReturnResult(sqlmock.NewResult(0, 0))
	}
	expectObjects(mock, n, "USER_TABLE", "SEQUENCE_OBJECT", "USER_TABLE")
}

// shapeRows lists the columns of required with their collations, changed
// by override (a collation, or "-" to leave the column out).
func shapeRows(required, override map[string]string) *sqlmock.Rows {
	rows := sqlmock.NewRows([]string{"name", "collation_name"})
	for _, col := range slices.Sorted(maps.Keys(required)) {
		collation := required[col]
		if c, ok := override[col]; ok {
			if c == "-" {
				continue
			}
			collation = c
		}
		rows.AddRow(col, collation)
	}
	return rows
}

func TestEnsureSchema(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	ctx := context.Background()

	t.Run("creates and checks", func(t *testing.T) {
		db, mock := newMockDB(t)
		expectDDL(mock, n, -1, nil)
		expectShapes(mock, n, nil, nil)
		if err := EnsureSchema(ctx, db, "lease", "Leases"); err != nil {
			t.Fatal(err)
		}
	})

	// A concurrent creator wins the race: "There is already an object
	// named ..." (2714, reported with 2759 after CREATE SCHEMA) or 1913 for
	// the index count as success.
	races := map[string]error{
		"schema":      mssql.Error{Number: 2759, All: []mssql.Error{{Number: 2714}, {Number: 2759}}},
		"sequence":    mssql.Error{Number: 2714},
		"table":       mssql.Error{Number: 1750, All: []mssql.Error{{Number: 2714}, {Number: 1750}}},
		"upgrade":     mssql.Error{Number: 2705, Message: "Column names in each table must be unique."},
		"index":       mssql.Error{Number: 1913},
		"queue":       mssql.Error{Number: 1750, All: []mssql.Error{{Number: 2714}, {Number: 1750}}},
		"queue index": mssql.Error{Number: 1913},
	}
	for i, what := range []string{"schema", "sequence", "table", "upgrade", "index", "queue", "queue index"} {
		t.Run("race on "+what, func(t *testing.T) {
			db, mock := newMockDB(t)
			expectDDL(mock, n, i, races[what])
			expectShapes(mock, n, nil, nil)
			if err := EnsureSchema(ctx, db, "lease", "Leases"); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("permission denied", func(t *testing.T) {
		db, mock := newMockDB(t)
		denied := mssql.Error{Number: 262, Message: "CREATE TABLE permission denied"}
		expectDurability(mock, "DISABLED")
		mock.ExpectExec(ddlStatements(n)[0]).WillReturnResult(sqlmock.NewResult(0, 0))
		mock.ExpectExec(ddlStatements(n)[1]).WillReturnResult(sqlmock.NewResult(0, 0))
		mock.ExpectExec(ddlStatements(n)[2]).WillReturnError(denied)
		err := EnsureSchema(ctx, db, "lease", "Leases")
		var me mssql.Error
		if !errors.As(err, &me) || me.Number != 262 {
			t.Fatalf("err = %v, want the permission error", err)
		}
	})

	// A concurrent creator on an engine that reports it with numbers of its
	// own (Babelfish: 219, or 2627 on its catalog): the guarded batch runs
	// again, finds the object and succeeds.
	t.Run("concurrent creator, other error numbers", func(t *testing.T) {
		db, mock := newMockDB(t)
		expectDurability(mock, "DISABLED")
		for i, stmt := range ddlStatements(n) {
			if i == 2 {
				mock.ExpectExec(stmt).WithoutArgs().WillReturnError(mssql.Error{Number: 219, Message: `type "leases" already exists`})
			}
			mock.ExpectExec(stmt).WithoutArgs().WillReturnResult(sqlmock.NewResult(0, 0))
		}
		expectObjects(mock, n, "USER_TABLE", "SEQUENCE_OBJECT", "USER_TABLE")
		expectShapes(mock, n, nil, nil)
		if err := EnsureSchema(ctx, db, "lease", "Leases"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ROWVERSION refused", func(t *testing.T) {
		db, mock := newMockDB(t)
		expectDurability(mock, "DISABLED")
		refused := mssql.Error{Number: 33557097, Message: "To use the ROWVERSION datatype, set 'babelfishpg_tsql.escape_hatch_rowversion' to 'ignore'"}
		for i, stmt := range ddlStatements(n) {
			if i == 2 {
				mock.ExpectExec(stmt).WithoutArgs().WillReturnError(refused)
				mock.ExpectExec(stmt).WithoutArgs().WillReturnError(refused)
				break
			}
			mock.ExpectExec(stmt).WithoutArgs().WillReturnResult(sqlmock.NewResult(0, 0))
		}
		if err := EnsureSchema(ctx, db, "lease", "Leases"); !errors.Is(err, ErrRowVersionRefused) || !strings.Contains(err.Error(), "sp_babelfish_configure") {
			t.Fatalf("err = %v, want ErrRowVersionRefused naming the setting", err)
		}
	})

	// As Babelfish for PostgreSQL answers: no delayed durability setting
	// (NULL), and column names folded to lower case.
	t.Run("NULL durability and lower-cased column names", func(t *testing.T) {
		db, mock := newMockDB(t)
		mock.ExpectQuery(durabilitySQL).WithoutArgs().WillReturnRows(sqlmock.NewRows([]string{"delayed_durability_desc"}).AddRow(nil))
		for _, stmt := range ddlStatements(n) {
			mock.ExpectExec(stmt).WithoutArgs().WillReturnResult(sqlmock.NewResult(0, 0))
		}
		expectObjects(mock, n, "USER_TABLE", "SEQUENCE_OBJECT", "USER_TABLE")
		lower := func(required map[string]string) *sqlmock.Rows {
			rows := sqlmock.NewRows([]string{"name", "collation_name"})
			for _, col := range slices.Sorted(maps.Keys(required)) {
				rows.AddRow(strings.ToLower(col), strings.ToLower(required[col]))
			}
			return rows
		}
		mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", n.tableQ)).WillReturnRows(lower(requiredColumns))
		mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", n.queueQ)).WillReturnRows(lower(requiredQueueColumns))
		mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", n.holdsQ)).WillReturnRows(lower(requiredHoldsColumns))
		if err := EnsureSchema(ctx, db, "lease", "Leases"); err != nil {
			t.Fatal(err)
		}
	})

	for name, override := range map[string]map[string]string{
		"reference product table":  {"FencingToken": "-", "LeaseNameBytes": "-"},
		"case-insensitive names":   {"LeaseName": "SQL_Latin1_General_CP1_CI_AS"},
		"case-insensitive attempt": {"AttemptId": "SQL_Latin1_General_CP1_CI_AS"},
		"no attempt column":        {"AttemptId": "-"},
	} {
		t.Run(name, func(t *testing.T) {
			db, mock := newMockDB(t)
			expectDDL(mock, n, -1, nil)
			mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", n.tableQ)).WillReturnRows(shapeRows(requiredColumns, override))
			if err := EnsureSchema(ctx, db, "lease", "Leases"); !errors.Is(err, ErrSchemaMismatch) {
				t.Fatalf("err = %v, want ErrSchemaMismatch", err)
			}
		})
	}
	// The queue table's shape is checked too, after the lease table's: a
	// table of that name made by something else, or a queue table of an
	// older shape, is a mismatch naming the queue table.
	for name, override := range map[string]map[string]string{
		"queue without turn":              {"TurnStartedAtUtc": "-"},
		"queue without order":             {"Position": "-"},
		"case-insensitive queued names":   {"LeaseName": "SQL_Latin1_General_CP1_CI_AS"},
		"case-insensitive queued owner":   {"OwnerInstanceId": "SQL_Latin1_General_CP1_CI_AS"},
		"case-insensitive queued attempt": {"AttemptId": "SQL_Latin1_General_CP1_CI_AS"},
	} {
		t.Run(name, func(t *testing.T) {
			db, mock := newMockDB(t)
			expectDDL(mock, n, -1, nil)
			expectShapes(mock, n, nil, override)
			err := EnsureSchema(ctx, db, "lease", "Leases")
			if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), "[lease].[Leases_Queue]") {
				t.Fatalf("err = %v, want ErrSchemaMismatch naming the queue table", err)
			}
		})
	}

	// An object with the sequence's (or the table's) name that is not a
	// sequence (a table) makes CREATE SEQUENCE fail with "already an
	// object named", which counts as a concurrent creator's success: the
	// kind check must catch it, naming the object.
	for name, kinds := range map[string][3]string{
		"sequence name is a table": {"USER_TABLE", "USER_TABLE", "USER_TABLE"},
		"sequence name is a view":  {"USER_TABLE", "VIEW", "USER_TABLE"},
		"table name is a view":     {"VIEW", "SEQUENCE_OBJECT", "USER_TABLE"},
		"sequence missing":         {"USER_TABLE", "", "USER_TABLE"},
		"queue name is a view":     {"USER_TABLE", "SEQUENCE_OBJECT", "VIEW"},
		"queue name is a sequence": {"USER_TABLE", "SEQUENCE_OBJECT", "SEQUENCE_OBJECT"},
	} {
		t.Run(name, func(t *testing.T) {
			db, mock := newMockDB(t)
			expectDurability(mock, "DISABLED")
			for i, stmt := range ddlStatements(n) {
				e := mock.ExpectExec(stmt)
				if i == 1 && kinds[1] != "" {
					e.WillReturnError(mssql.Error{Number: 2714, Message: "There is already an object named 'Leases_FencingToken' in the database."})
				} else {
					e.WillReturnResult(sqlmock.NewResult(0, 0))
				}
			}
			expectObjects(mock, n, kinds[0], kinds[1], kinds[2])
			err := EnsureSchema(ctx, db, "lease", "Leases")
			if !errors.Is(err, ErrSchemaMismatch) {
				t.Fatalf("err = %v, want ErrSchemaMismatch", err)
			}
			if kinds[1] != "SEQUENCE_OBJECT" && !strings.Contains(err.Error(), "[lease].[Leases_FencingToken] is ") {
				t.Errorf("error does not name the sequence: %v", err)
			}
			if kinds[0] != "USER_TABLE" && !strings.Contains(err.Error(), "[lease].[Leases] is a VIEW, not a table") {
				t.Errorf("error does not name the table: %v", err)
			}
			if kinds[2] != "USER_TABLE" && !strings.Contains(err.Error(), "[lease].[Leases_Queue] is a "+kinds[2]+", not a table") {
				t.Errorf("error does not name the queue table: %v", err)
			}
		})
	}

	// DELAYED_DURABILITY = FORCED: refused before any DDL runs (the mock
	// has no more expectations, so any DDL would fail differently).
	t.Run("delayed durability forced", func(t *testing.T) {
		db, mock := newMockDB(t)
		expectDurability(mock, "FORCED")
		err := EnsureSchema(ctx, db, "lease", "Leases")
		if !errors.Is(err, ErrDelayedDurability) || !strings.Contains(err.Error(), "DELAYED_DURABILITY = DISABLED") {
			t.Fatalf("err = %v, want ErrDelayedDurability saying what to do", err)
		}
	})
	t.Run("delayed durability allowed", func(t *testing.T) {
		db, mock := newMockDB(t)
		mock.ExpectQuery(durabilitySQL).WillReturnRows(sqlmock.NewRows([]string{"d"}).AddRow("ALLOWED"))
		for _, stmt := range ddlStatements(n) {
			mock.ExpectExec(stmt).WillReturnResult(sqlmock.NewResult(0, 0))
		}
		expectObjects(mock, n, "USER_TABLE", "SEQUENCE_OBJECT", "USER_TABLE")
		expectShapes(mock, n, nil, nil)
		if err := EnsureSchema(ctx, db, "lease", "Leases"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("durability unreadable", func(t *testing.T) {
		db, mock := newMockDB(t)
		mock.ExpectQuery(durabilitySQL).WillReturnRows(sqlmock.NewRows([]string{"d"}))
		if err := EnsureSchema(ctx, db, "lease", "Leases"); err == nil || !strings.Contains(err.Error(), "delayed durability") {
			t.Fatalf("err = %v, want an error about reading the setting", err)
		}
	})

	t.Run("invalid names touch nothing", func(t *testing.T) {
		db, _ := newMockDB(t)
		if err := EnsureSchema(ctx, db, "lease", "a\x00b"); !errors.Is(err, ErrInvalidIdentifier) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestEnsureSchemaUpgradesPreviousTable: on a table made by an earlier
// version (no AttemptId, no queue table), EnsureSchema sends the ALTER TABLE
// that adds the column with its default and the CREATE TABLE of the queue
// and its index, each guarded by a test of what exists, and the shape checks
// then pass. The mock cannot run the IF tests; the statements' text is
// checked here and their grammar by TestTSQLGrammar.
func TestEnsureSchemaUpgradesPreviousTable(t *testing.T) {
	n := mustNames(t, "lease", "Leases")
	upgrade := "IF COL_LENGTH(N'[lease].[Leases]', N'AttemptId') IS NULL\n    ALTER TABLE [lease].[Leases] ADD AttemptId NVARCHAR(64) COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT [DF_Leases_AttemptId] DEFAULT (N'');"
	stmts := ddlStatements(n)
	if !slices.Contains(stmts, upgrade) {
		t.Fatalf("no upgrade statement among:\n%s", strings.Join(stmts, "\n"))
	}
	if i := slices.Index(stmts, upgrade); i < 2 || !strings.Contains(stmts[i-1], "CREATE TABLE") {
		t.Errorf("the upgrade must follow CREATE TABLE (statement %d)", i)
	}
	// The queue is a table of its own, so a lease table of any earlier
	// version gets it from the guarded CREATE TABLE, and its index after it.
	queue := slices.IndexFunc(stmts, func(s string) bool {
		return strings.HasPrefix(s, "IF OBJECT_ID(N'[lease].[Leases_Queue]', N'U') IS NULL\n    CREATE TABLE [lease].[Leases_Queue] (")
	})
	queueIndex := slices.Index(stmts, "IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'[lease].[Leases_Queue]') AND name = N'IX_Leases_QueueExpires')\n    CREATE NONCLUSTERED INDEX [IX_Leases_QueueExpires] ON [lease].[Leases_Queue] (EntryExpiresAtUtc);")
	if queue < 0 || queueIndex != queue+1 {
		t.Errorf("want the queue's guarded CREATE TABLE then its index (statements %d, %d)", queue, queueIndex)
	}
	db, mock := newMockDB(t)
	expectDurability(mock, "DISABLED")
	for _, stmt := range stmts {
		mock.ExpectExec(stmt).WillReturnResult(sqlmock.NewResult(0, 0))
	}
	expectObjects(mock, n, "USER_TABLE", "SEQUENCE_OBJECT", "USER_TABLE")
	expectShapes(mock, n, nil, nil)
	if err := EnsureSchema(context.Background(), db, "lease", "Leases"); err != nil {
		t.Fatal(err)
	}
}
