package sqlserver

import (
	"context"
	"database/sql"
	"errors"
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
		"FencingToken    BIGINT            NOT NULL,",
		"ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL,",
		"Metadata        NVARCHAR(4000)    NULL,",
		"[RowVersion]    ROWVERSION        NOT NULL,",
		"CONSTRAINT [PK_Leases] PRIMARY KEY CLUSTERED (LeaseName, LeaseNameBytes),",
		"CONSTRAINT [CK_Leases_LeaseNameBytes] CHECK (LeaseNameBytes = DATALENGTH(LeaseName)),",
		"CREATE NONCLUSTERED INDEX [IX_Leases_ExpiresAtUtc] ON [lease].[Leases] (ExpiresAtUtc);\nGO\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("CreateScript lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "\nGO\n"); n != 4 {
		t.Errorf("%d batches, want 4", n)
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

func TestCheckIdentifiers(t *testing.T) {
	ok := []struct{ schema, table string }{
		{"lease", "Leases"},
		{"dbo", "weird ]name[ with 'quotes'; -- and /* comments */"},
		{"ユニコード", "テーブル"},
		{strings.Repeat("s", 128), strings.Repeat("t", 110)},
	}
	for _, c := range ok {
		if err := CheckIdentifiers(c.schema, c.table); err != nil {
			t.Errorf("CheckIdentifiers(%q, %q) = %v", c.schema, c.table, err)
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
		err := CheckIdentifiers(c.schema, c.table)
		if !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("CheckIdentifiers(%q, %q) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
		if _, err := New(&sql.DB{}, WithTable(c.schema, c.table)); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("New(WithTable(%q, %q)) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
	}
}

// expectDDL expects the four DDL batches; fail, when not nil, answers the
// batch at that index with an error.
func expectDDL(mock sqlmock.Sqlmock, n objectNames, failAt int, fail error) {
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
}

func shapeRows(override map[string]string) *sqlmock.Rows {
	rows := sqlmock.NewRows([]string{"name", "collation_name"})
	for _, col := range []string{"LeaseName", "LeaseNameBytes", "OwnerInstanceId", "FencingToken", "AcquiredAtUtc", "RenewedAtUtc", "ExpiresAtUtc", "Metadata", "RowVersion"} {
		collation := requiredColumns[col]
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
		mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", "[lease].[Leases]")).WillReturnRows(shapeRows(nil))
		if err := EnsureSchema(ctx, db, "lease", "Leases"); err != nil {
			t.Fatal(err)
		}
	})

	// A concurrent creator wins the race: "There is already an object
	// named ..." (2714, reported with 2759 after CREATE SCHEMA) or 1913 for
	// the index count as success.
	races := map[string]error{
		"schema":   mssql.Error{Number: 2759, All: []mssql.Error{{Number: 2714}, {Number: 2759}}},
		"sequence": mssql.Error{Number: 2714},
		"table":    mssql.Error{Number: 1750, All: []mssql.Error{{Number: 2714}, {Number: 1750}}},
		"index":    mssql.Error{Number: 1913},
	}
	for i, what := range []string{"schema", "sequence", "table", "index"} {
		t.Run("race on "+what, func(t *testing.T) {
			db, mock := newMockDB(t)
			expectDDL(mock, n, i, races[what])
			mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", "[lease].[Leases]")).WillReturnRows(shapeRows(nil))
			if err := EnsureSchema(ctx, db, "lease", "Leases"); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("permission denied", func(t *testing.T) {
		db, mock := newMockDB(t)
		denied := mssql.Error{Number: 262, Message: "CREATE TABLE permission denied"}
		expectDDL(mock, n, 2, denied)
		err := EnsureSchema(ctx, db, "lease", "Leases")
		var me mssql.Error
		if !errors.As(err, &me) || me.Number != 262 {
			t.Fatalf("err = %v, want the permission error", err)
		}
	})

	for name, override := range map[string]map[string]string{
		"reference product table": {"FencingToken": "-", "LeaseNameBytes": "-"},
		"case-insensitive names":  {"LeaseName": "SQL_Latin1_General_CP1_CI_AS"},
	} {
		t.Run(name, func(t *testing.T) {
			db, mock := newMockDB(t)
			expectDDL(mock, n, -1, nil)
			mock.ExpectQuery(tableShapeSQL).WithArgs(sql.Named("table", "[lease].[Leases]")).WillReturnRows(shapeRows(override))
			if err := EnsureSchema(ctx, db, "lease", "Leases"); !errors.Is(err, ErrSchemaMismatch) {
				t.Fatalf("err = %v, want ErrSchemaMismatch", err)
			}
		})
	}

	t.Run("invalid names touch nothing", func(t *testing.T) {
		db, _ := newMockDB(t)
		if err := EnsureSchema(ctx, db, "lease", "a\x00b"); !errors.Is(err, ErrInvalidIdentifier) {
			t.Fatalf("err = %v", err)
		}
	})
}
