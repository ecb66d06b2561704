package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/fencetest"
)

var defaultFence = FenceTable{Schema: DefaultSchema, Table: DefaultFenceTable}

// fenceBatches are the guard's batches for the grammar check.
func fenceBatches() []tsqlBatch {
	var out []tsqlBatch
	for _, tn := range grammarNames {
		q := quoteIdent(tn.schema) + "." + quoteIdent(tn.table)
		out = append(out, tsqlBatch{Name: "fence " + q, SQL: fenceSQL(q)})
		for i, stmt := range fenceDDL(tn.schema, tn.table) {
			out = append(out, tsqlBatch{Name: fmt.Sprintf("fence DDL %d %s", i, q), SQL: stmt})
		}
		out = append(out, tsqlBatch{Name: "FenceCreateScript " + q, SQL: FenceCreateScript(tn.schema, tn.table)})
	}
	return out
}

func TestFencePassesAndRecords(t *testing.T) {
	db, mock := newMockDB(t)
	mock.ExpectBegin()
	mock.ExpectQuery(fenceSQL("[lease].[Fences]")).WithArgs(sql.Named("resource", "invoices"), sql.Named("token", int64(7))).
		WillReturnRows(sqlmock.NewRows([]string{"Passed", "Highest"}).AddRow(true, int64(7)))
	mock.ExpectCommit()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Fence(ctx, tx, "invoices", 7); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestFenceRefusesAStaleToken(t *testing.T) {
	db, mock := newMockDB(t)
	mock.ExpectBegin()
	mock.ExpectQuery(fenceSQL("[lease].[Fences]")).WithArgs(sql.Named("resource", "invoices"), sql.Named("token", int64(6))).
		WillReturnRows(sqlmock.NewRows([]string{"Passed", "Highest"}).AddRow(false, int64(9)))
	mock.ExpectRollback()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = Fence(ctx, tx, "invoices", 6)
	var se *leasehold.StaleTokenError
	if !errors.Is(err, leasehold.ErrStaleToken) || !errors.As(err, &se) || se.Token != 6 || se.Highest != 9 || se.Resource != "invoices" {
		t.Fatalf("Fence with 6 after 9: %v", err)
	}
	_ = tx.Rollback()
}

// Bad input sends nothing: the mock expects no query.
func TestFenceRefusesBadInputUnsent(t *testing.T) {
	db, mock := newMockDB(t)
	mock.ExpectBegin()
	mock.ExpectRollback()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for name, err := range map[string]error{
		"empty resource":   Fence(ctx, tx, "", 1),
		"token 0":          Fence(ctx, tx, "r", 0),
		"token 2^63":       Fence(ctx, tx, "r", 1<<63),
		"451 units":        Fence(ctx, tx, strings.Repeat("x", 451), 1),
		"empty table name": FenceTable{Schema: "lease"}.Fence(ctx, tx, "r", 1),
	} {
		if name == "empty table name" {
			if !errors.Is(err, ErrInvalidIdentifier) {
				t.Errorf("%s: %v, want ErrInvalidIdentifier", name, err)
			}
			continue
		}
		if !errors.Is(err, fence.ErrInvalidFence) {
			t.Errorf("%s: %v, want ErrInvalidFence", name, err)
		}
	}
}

func TestFenceSQLLocksTheRowToTheEnd(t *testing.T) {
	q := fenceSQL("[lease].[Fences]")
	for _, want := range []string{"WITH (UPDLOCK, HOLDLOCK) WHERE Resource = @resource", "ELSE IF @highest <= @token"} {
		if !strings.Contains(q, want) {
			t.Errorf("the fence batch lacks %q:\n%s", want, q)
		}
	}
}

// The conformance suite on a real server, when LEASEHOLD_SQLSERVER_DSN
// names one.
func TestRealServerFenceConformance(t *testing.T) {
	db := realServerDB(t)
	fencetest.Run(t, func(t *testing.T) fencetest.Guard {
		g := &sqlFenceGuard{db: db, t: FenceTable{Schema: realTestSchema, Table: fmt.Sprintf("Fences_%d_%04x", time.Now().UnixNano(), rand.N(1<<16))}}
		g.data = quoteIdent(g.t.Schema) + "." + quoteIdent(g.t.Table+"_Data")
		ctx := realCtx(t)
		t.Cleanup(func() {
			for _, q := range []string{quoteIdent(g.t.Schema) + "." + quoteIdent(g.t.Table), g.data} {
				if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+q); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		})
		if err := EnsureFenceSchema(ctx, db, g.t.Schema, g.t.Table); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+g.data+" (Resource NVARCHAR(450) PRIMARY KEY, Value NVARCHAR(400) NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		return g
	})
}

type sqlFenceGuard struct {
	db   *sql.DB
	t    FenceTable
	data string
}

func (g *sqlFenceGuard) Write(ctx context.Context, resource string, token uint64, value string) error {
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := g.t.Fence(ctx, tx, resource, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+g.data+" SET Value = @v WHERE Resource = @r; IF @@ROWCOUNT = 0 INSERT INTO "+g.data+" VALUES (@r, @v);",
		sql.Named("r", resource), sql.Named("v", value)); err != nil {
		return err
	}
	return tx.Commit()
}

func (g *sqlFenceGuard) Read(ctx context.Context, resource string) (string, error) {
	var v string
	err := g.db.QueryRowContext(ctx, "SELECT Value FROM "+g.data+" WHERE Resource = @r", sql.Named("r", resource)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}
