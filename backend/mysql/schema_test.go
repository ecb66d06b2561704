package mysql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// TestNamesCompareExactly: trailing spaces and case make other names, which
// a PAD SPACE or case-insensitive collation would merge.
func TestNamesCompareExactly(t *testing.T) {
	b := newEnv(t).backend(t)
	ctx := context.Background()
	names := []string{"s", "s ", "S", "s  "}
	for i, k := range names {
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: k, Owner: "o", Attempt: "a" + string(rune('0'+i)), TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if !g.Acquired {
			t.Fatalf("Acquire(%q) refused: the name collides with another (holder %q)", k, g.Holder)
		}
	}
	for _, k := range names {
		hs, err := b.Holders(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 || hs[0].Key != k {
			t.Fatalf("Holders(%q) = %+v, want the one holding of that very name", k, hs)
		}
	}
}

// TestEnsureSchemaRefusesAnotherShape: a table of the lease table's name
// that is not ours is refused, and left as it was.
func TestEnsureSchemaRefusesAnotherShape(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	table := randomName("lh_other_")
	if _, err := e.db.ExecContext(ctx, "CREATE TABLE `"+e.schema+"`.`"+table+"` (name VARCHAR(100) PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range []string{"", holdsSuffix, queueSuffix} {
			_, _ = e.db.Exec("DROP TABLE IF EXISTS `" + e.schema + "`.`" + table + s + "`")
		}
	})
	err := EnsureSchema(ctx, e.db, e.schema, table)
	if !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("EnsureSchema on a foreign table = %v, want ErrSchemaMismatch", err)
	}
	var typ string
	if err := e.db.QueryRowContext(ctx, "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = 'name'", e.schema, table).Scan(&typ); err != nil || typ != "varchar" {
		t.Fatalf("the foreign table changed: name is %q (%v)", typ, err)
	}
}

// TestEnsureSchemaRefusesANewerVersion: a table of another schema version
// is refused.
func TestEnsureSchemaRefusesANewerVersion(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.db.ExecContext(ctx, "ALTER TABLE `"+e.schema+"`.`"+e.table+"` COMMENT = 'leasehold schema 3'"); err != nil {
		t.Fatal(err)
	}
	if err := EnsureSchema(ctx, e.db, e.schema, e.table); !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), "version") {
		t.Fatalf("EnsureSchema on a schema 3 table = %v, want ErrSchemaMismatch naming the version", err)
	}
}

// TestEnsureSchemaIsIdempotent runs it again on an existing table.
func TestEnsureSchemaIsIdempotent(t *testing.T) {
	e := newEnv(t)
	if err := EnsureSchema(context.Background(), e.db, e.schema, e.table); err != nil {
		t.Fatal(err)
	}
}

func TestValidateTable(t *testing.T) {
	for _, c := range []struct{ schema, table string }{
		{"", "t"}, {"s", ""}, {"s-x", "t"}, {"s", "t`x"}, {"s", strings.Repeat("t", 59)}, {strings.Repeat("s", 65), "t"},
	} {
		if err := ValidateTable(c.schema, c.table); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("ValidateTable(%q, %q) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
		if _, err := New(openDB(t), WithTable(c.schema, c.table)); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("New(WithTable(%q, %q)) = %v, want ErrInvalidIdentifier", c.schema, c.table, err)
		}
		if s := CreateScript(c.schema, c.table); !strings.Contains(s, "SIGNAL") || strings.Contains(s, "CREATE") {
			t.Errorf("CreateScript(%q, %q) creates something:\n%s", c.schema, c.table, s)
		}
	}
	if err := ValidateTable("leasehold", strings.Repeat("t", 58)); err != nil {
		t.Errorf("a 58-character table: %v", err)
	}
}

func TestVersionKeepsCounters(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true, "10.3.39-MariaDB": true, "10.2.44-MariaDB": false, "11.4.2-MariaDB": true,
		"8.0.36": true, "8.4.0": true, "5.7.44-log": false, "garbage": false,
	} {
		if got := versionKeepsCounters(v); got != want {
			t.Errorf("versionKeepsCounters(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestServerIsDurable: the test server passes the durability check (as
// ensure-mariadb sets it up), so the check reads the settings it names.
func TestServerIsDurable(t *testing.T) {
	if err := checkServer(context.Background(), openDB(t)); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	db := openDB(t)
	for _, o := range []Option{WithMaxCalls(0), WithRetry(0, time.Millisecond, time.Second), WithRetry(3, time.Second, time.Millisecond), WithSweep(-time.Second, 1), WithSweep(time.Second, -1)} {
		if _, err := New(db, o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New = %v, want ErrInvalidOption", err)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

// TestTokensSurviveReleaseAndDeletion: a name freed and forgotten (its rows
// deleted) gets a higher token on its next grant.
func TestTokensSurviveReleaseAndDeletion(t *testing.T) {
	b := newEnv(t).backend(t)
	ctx := context.Background()
	var last uint64
	for i := range 5 {
		a := "att" + string(rune('0'+i))
		g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", Attempt: a, TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("acquire %d: %+v %v", i, g, err)
		}
		if g.Token <= last {
			t.Fatalf("token %d after %d", g.Token, last)
		}
		last = g.Token
		if err := b.Release(ctx, backend.ReleaseRequest{Key: "k", Owner: "o", Attempt: a, Token: g.Token}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCallsBoundedByPool: New reads the pool's limit.
func TestCallsBoundedByPool(t *testing.T) {
	if got := callBound(0, 0); got != DefaultMaxCalls {
		t.Errorf("unlimited pool: %d", got)
	}
	if got := callBound(4, 0); got != 4 {
		t.Errorf("pool of 4: %d", got)
	}
	if got := callBound(4, 10); got != 4 {
		t.Errorf("pool of 4, WithMaxCalls(10): %d", got)
	}
	db := openDB(t)
	db.SetMaxOpenConns(3)
	b, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if cap(b.slots) != 3 {
		t.Errorf("slots = %d, want 3", cap(b.slots))
	}
}
