package sqlserver

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// realServerDB opens the SQL Server named by LEASEHOLD_SQLSERVER_DSN. There is
// no SQL Server on the development and CI machines, so an unset variable
// always skips. A set but unreachable server fails the test under
// LEASEHOLD_REQUIRE_SERVICES=1 and skips otherwise. The DSN is only ever shown
// with its password redacted.
func realServerDB(t *testing.T) *sql.DB {
	t.Helper()
	dsn := os.Getenv("LEASEHOLD_SQLSERVER_DSN")
	if dsn == "" {
		t.Skip("LEASEHOLD_SQLSERVER_DSN is not set: skipping the tests against a real SQL Server " +
			"(set it, e.g. sqlserver://sa:PASSWORD@127.0.0.1:1433?database=test, to run them)")
	}
	db, err := sql.Open("sqlserver", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		msg := "SQL Server at " + redactDSN(dsn) + " is unreachable: " + err.Error()
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var adoPassword = regexp.MustCompile(`(?i)((?:^|;)\s*(?:password|pwd)\s*=)\s*(?:"[^"]*"|'[^']*'|\{[^}]*\}|[^;]*)`)

// redactDSN hides the password of a URL DSN (sqlserver://user:pass@host) or
// an ADO DSN (server=...;password=...).
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Host != "" {
		q := u.Query()
		for k := range q {
			if k == "password" || k == "pwd" {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
		return u.Redacted()
	}
	return adoPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

func TestRedactDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"sqlserver://sa:s3cret@db:1433?database=test":         "sqlserver://sa:xxxxx@db:1433?database=test",
		"sqlserver://db:1433?database=test&password=s3cret":   "sqlserver://db:1433?database=test&password=xxxxx",
		"server=db;user id=sa;password=s3cret;database=test":  "server=db;user id=sa;password=xxxxx;database=test",
		"Server=db;PWD={s3c;ret};Database=test":               "Server=db;PWD=xxxxx;Database=test",
		"odbc:server=db;user id=sa;Password=\"s3cret\";app=x": "odbc:server=db;user id=sa;Password=xxxxx;app=x",
	} {
		got := redactDSN(dsn)
		if got != want || strings.Contains(got, "s3c") {
			t.Errorf("redactDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
}
