package sqlserver

import (
	"context"
	"database/sql"
	"net/url"
	"os"
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
	// Enough for every test's concurrency; more would only make a small
	// server's sessions fight over its cores.
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	return db
}

// redactDSN hides every secret of a connection string, in each form
// go-mssqldb accepts, for messages: the password of a URL
// (sqlserver://user:pass@host) and any password-like query parameter; in
// ADO (key=value;...) and ODBC (odbc:key=value;...) strings the value of
// every key naming a password or secret, bare, "double-quoted" (with ""
// escapes), 'single-quoted' or {braced} (with }} escapes), so that a ';' or
// '%' inside a quoted password cannot end the redaction early. Whatever it
// cannot parse it hides whole: over-hiding is the safe failure.
func redactDSN(dsn string) string {
	if strings.HasPrefix(strings.ToLower(dsn), "sqlserver:") {
		return redactURL(dsn)
	}
	prefix := ""
	if strings.HasPrefix(strings.ToLower(dsn), "odbc:") {
		prefix, dsn = dsn[:len("odbc:")], dsn[len("odbc:"):]
	}
	return prefix + redactKeyValues(dsn)
}

const redacted = "xxxxx"

// secretKey reports whether a connection string key carries a secret
// (password, pwd, client secret, certificate password, ...).
func secretKey(key string) bool {
	k := strings.ToLower(strings.TrimSpace(key))
	return k == "pwd" || strings.Contains(k, "password") || strings.Contains(k, "secret")
}

func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" || u.Opaque != "" {
		// An invalid escape ("p%ss") or an opaque form: the password's
		// extent is unknown, so nothing but the scheme is shown.
		return dsn[:len("sqlserver:")] + "//" + redacted + " (unparsable URL, redacted whole)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), redacted)
	}
	params := strings.Split(u.RawQuery, "&")
	for i, p := range params {
		k, _, hasValue := strings.Cut(p, "=")
		if key, err := url.QueryUnescape(k); (err != nil || secretKey(key)) && hasValue {
			params[i] = k + "=" + redacted
		}
	}
	u.RawQuery = strings.Join(params, "&")
	return u.String()
}

// redactKeyValues hides the secret values of an ADO or ODBC string, keeping
// the rest as written.
func redactKeyValues(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		eq := strings.IndexAny(s, "=;")
		if eq < 0 || s[eq] == ';' {
			end := len(s)
			if eq >= 0 {
				end = eq + 1
			}
			b.WriteString(s[:end])
			s = s[end:]
			continue
		}
		key := s[:eq]
		b.WriteString(s[:eq+1])
		s = s[eq+1:]
		lead := len(s) - len(strings.TrimLeft(s, " \t"))
		end := valueEnd(s, lead)
		if secretKey(key) {
			b.WriteString(s[:lead] + redacted)
		} else {
			b.WriteString(s[:end])
		}
		s = s[end:]
	}
	return b.String()
}

// valueEnd returns where the value starting at s[start:] ends: at the ';'
// after it or at the end. A value opening with {, " or ' runs to its closing
// character (doubled, it is an escape); one never closed runs to the end.
func valueEnd(s string, start int) int {
	i := start
	if i < len(s) {
		closer := map[byte]byte{'{': '}', '"': '"', '\'': '\''}[s[i]]
		if closer != 0 {
			for i++; ; i++ {
				if i >= len(s) {
					return len(s)
				}
				if s[i] == closer {
					if i+1 < len(s) && s[i+1] == closer {
						i++
						continue
					}
					i++
					break
				}
			}
		}
	}
	if j := strings.IndexByte(s[i:], ';'); j >= 0 {
		return i + j
	}
	return len(s)
}

// TestRedactDSN: no password survives, in any form go-mssqldb accepts, and
// the rest stays readable.
func TestRedactDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		// URL forms.
		"sqlserver://sa:s3cret@db:1433?database=test":          "sqlserver://sa:xxxxx@db:1433?database=test",
		"sqlserver://sa:s3c%25r%3Bet@db?database=test":         "sqlserver://sa:xxxxx@db?database=test",
		"sqlserver://db:1433?database=test&password=s3cret":    "sqlserver://db:1433?database=test&password=xxxxx",
		"sqlserver://db?Password=s3cret&app+name=x&PWD=s3cret": "sqlserver://db?Password=xxxxx&app+name=x&PWD=xxxxx",
		"sqlserver://db?clientcertpassword=s3cret&database=t":  "sqlserver://db?clientcertpassword=xxxxx&database=t",
		"sqlserver://sa:s3c%ret@db:1433?database=test":         "sqlserver://xxxxx (unparsable URL, redacted whole)",
		"sqlserver:sa:s3cret@db":                               "sqlserver://xxxxx (unparsable URL, redacted whole)",
		"SQLServer://sa:s3c;ret@db/inst?database=test":         "sqlserver://sa:xxxxx@db/inst?database=test",
		// ADO forms.
		"server=db;user id=sa;password=s3cret;database=test":    "server=db;user id=sa;password=xxxxx;database=test",
		"Server=db;PWD={s3c;ret};Database=test":                 "Server=db;PWD=xxxxx;Database=test",
		"Server=db;Password=\"s3c;r\"\"et\";Database=test":      "Server=db;Password=xxxxx;Database=test",
		"Server=db;Password='s3c;ret';Database=test":            "Server=db;Password=xxxxx;Database=test",
		"Server=db; pwd = s3cret ;Database=test":                "Server=db; pwd = xxxxx;Database=test",
		"Server=db;Password=s3c%ret":                            "Server=db;Password=xxxxx",
		"Server=db;Password={s3c;ret":                           "Server=db;Password=xxxxx",
		"Server=db;Application Client Secret=s3cret;Database=t": "Server=db;Application Client Secret=xxxxx;Database=t",
		// ODBC forms, with }} escapes and ';' or '%' inside braces.
		"odbc:server=db;user id=sa;Password=\"s3cret\";app=x": "odbc:server=db;user id=sa;Password=xxxxx;app=x",
		"odbc:server=db;pwd={s3c;r}}e%t};database=test":       "odbc:server=db;pwd=xxxxx;database=test",
		"odbc:server=db;PASSWORD={s3c}}}}};database=test":     "odbc:server=db;PASSWORD=xxxxx;database=test",
		"odbc:server={a;b};password={s3c=ret;};user={u}":      "odbc:server={a;b};password=xxxxx;user={u}",
	} {
		got := redactDSN(dsn)
		if got != want || strings.Contains(got, "s3c") {
			t.Errorf("redactDSN(%q)\n got %q\nwant %q", dsn, got, want)
		}
	}
}
