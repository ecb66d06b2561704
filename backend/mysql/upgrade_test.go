package mysql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// asVersion1 turns e's tables into what a version-1 EnsureSchema left: no
// procedures, every table's comment at version 1.
func asVersion1(t *testing.T, e *testEnv) names {
	t.Helper()
	ctx := context.Background()
	n, _ := newNames(e.schema, e.table)
	for _, p := range procedureNames(n) {
		if _, err := e.db.ExecContext(ctx, "DROP PROCEDURE `"+n.schema+"`.`"+p+"`"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tb := range []string{n.leases, n.holds, n.queue} {
		if _, err := e.db.ExecContext(ctx, "ALTER TABLE "+tb+" COMMENT = '"+version1Comment+"'"); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestEnsureSchemaUpgradesVersion1: tables of version 1, with a live
// holding in them, get the procedures and the version-2 comment; the
// holding stays and the backend keeps its rules on it.
func TestEnsureSchemaUpgradesVersion1(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := asVersion1(t, e)
	if err := checkShape(ctx, e.db, n); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("checkShape on version-1 tables = %v, want ErrSchemaMismatch", err)
	}
	// A holding a version-1 backend granted: its rows as that backend wrote them.
	if _, err := e.db.ExecContext(ctx, "INSERT INTO "+n.leases+" (name) VALUES ('k')"); err != nil {
		t.Fatal(err)
	}
	res, err := e.db.ExecContext(ctx, "INSERT INTO "+n.holds+" (name, owner, attempt, holder_limit, acquired_us, expires_us, metadata)"+
		" VALUES ('k', 'old', 'a', 1, "+nowUs+", "+nowUs+" + 60000000, '')")
	if err != nil {
		t.Fatal(err)
	}
	oldToken, _ := res.LastInsertId()

	for range 2 { // idempotent: the second run finds version 2
		if err := EnsureSchema(ctx, e.db, e.schema, e.table); err != nil {
			t.Fatal(err)
		}
	}
	comments, err := tableComments(ctx, e.db, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comments {
		if c != versionComment {
			t.Fatalf("table comments after the upgrade = %q, want %q", comments, versionComment)
		}
	}

	b := e.backend(t)
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "new", Attempt: "b", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if g.Acquired || g.Holder != "old" || g.HolderToken != uint64(oldToken) {
		t.Fatalf("Acquire over the version-1 holding = %+v, want refused naming old's token %d", g, oldToken)
	}
	if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "old", Attempt: "a", Token: uint64(oldToken)}); err != nil {
		t.Fatal(err)
	}
	g, err = b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "new", Attempt: "b", TTL: time.Minute})
	if err != nil || !g.Acquired || g.Token <= uint64(oldToken) {
		t.Fatalf("Acquire after the release = %+v, %v, want a token above %d", g, err, oldToken)
	}
}

// TestEnsureSchemaUpgradesNothingElse: tables of version 1 whose columns
// are not ours are refused and get no procedures.
func TestEnsureSchemaUpgradesNothingElse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := asVersion1(t, e)
	if _, err := e.db.ExecContext(ctx, "ALTER TABLE "+n.queue+" DROP COLUMN turn_us"); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSchema(ctx, e.db, e.schema, e.table); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("EnsureSchema on a version-1 table of another shape = %v, want ErrSchemaMismatch", err)
	}
	var procs int
	if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME LIKE ?",
		n.schema, n.table+"\\_%").Scan(&procs); err != nil {
		t.Fatal(err)
	}
	if procs != 0 {
		t.Fatalf("%d procedures created beside tables of another shape", procs)
	}
}

// runScript runs a script for the mysql client statement by statement,
// following its DELIMITER lines as the client does.
func runScript(t *testing.T, e *testEnv, script string) {
	t.Helper()
	delim, stmt := ";", ""
	for _, line := range strings.Split(script, "\n") {
		if d, ok := strings.CutPrefix(line, "DELIMITER "); ok && stmt == "" {
			delim = strings.TrimSpace(d)
			continue
		}
		stmt += line + "\n"
		if s, ok := strings.CutSuffix(strings.TrimSpace(stmt), delim); ok {
			if _, err := e.db.ExecContext(context.Background(), s); err != nil {
				t.Fatalf("script statement %q: %v", s, err)
			}
			stmt = ""
		}
	}
	if strings.TrimSpace(stmt) != "" {
		t.Fatalf("script ends inside a statement: %q", stmt)
	}
}

// TestCreateScriptMakesWorkingTables: the script creates the tables and
// procedures EnsureSchema accepts, and upgrades version-1 tables as
// EnsureSchema does; run twice, it changes nothing.
func TestCreateScriptMakesWorkingTables(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := asVersion1(t, e)
	for range 2 {
		runScript(t, e, CreateScript(e.schema, e.table))
		if err := checkShape(ctx, e.db, n); err != nil {
			t.Fatal(err)
		}
	}
	g, err := e.backend(t).Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: time.Minute})
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire on the script's tables = %+v, %v", g, err)
	}
}
