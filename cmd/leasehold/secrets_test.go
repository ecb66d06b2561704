package main

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// passwords are the passwords TestPasswordsNeverPrinted tries: characters
// that URLs, key=value strings and quoting (%q, one-line escaping) treat
// specially, and a password too short for any redaction to hide. Every long
// one holds the marker SECRET, which nothing else prints.
var passwords = []string{
	"plainSECRETpw",
	"pa^SECRETx",
	"pa{SECRET}x",
	`pa"SECRETx`,
	`pa\SECRETx`,
	"pa/SECRETx",
	"pa@SECRETx",
	"pa:SECRETx",
	"pa%SECRETx",
	"pa SECRET'x",
	"a",
}

// leaked reports whether out shows the password pw of user usr: the marker,
// or for a short password the forms a message could hold it in.
func leaked(out, pw string) bool {
	if strings.Contains(pw, "SECRET") {
		return strings.Contains(out, "SECRET")
	}
	for _, form := range []string{"usr:" + pw + "@", "root:" + pw + "@", "password=" + pw, "password='" + pw, "usr:" + url.QueryEscape(pw)} {
		if strings.Contains(out, form) {
			return true
		}
	}
	return false
}

// keywordQuote quotes v as a libpq keyword value.
func keywordQuote(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// TestPasswordsNeverPrinted: for every store and every way of giving it a
// password (a URL as written and %-escaped, key=value pairs, an etcd
// endpoint with or without a scheme, a variable, an argument given without
// its flag), parse and connection failures name the store's host and never
// the password, whatever its characters or length.
func TestPasswordsNeverPrinted(t *testing.T) {
	t.Parallel()
	silent := newCountingListener(t) // accepts and never answers: the call times out
	closed := newCountingListener(t)
	port := closed.port()
	closed.Close() // nothing listens there: refused
	host := "127.0.0.1:" + port
	type want struct {
		code int
		in   []string // the message holds one of these
	}
	reached := want{exitFailure, []string{"cannot reach"}}
	badAddr := want{exitUsage, []string{"is not a valid", "has an @ outside", "is not host:port", "has an @ but no redis:// scheme", "carries user information"}}
	usage := want{exitUsage, []string{"one NAME only", "unexpected argument", "unknown command", "invalid value"}}
	for _, pw := range passwords {
		userinfo := url.UserPassword("usr", pw).String()
		type tc struct {
			name string
			env  []string
			args []string
			want want
		}
		cases := []tc{
			{"redis URL", nil, []string{"list", "-redis", "redis://usr:" + pw + "@" + host + "/0"}, want{}},
			{"redis URL escaped", nil, []string{"list", "-redis", "redis://" + userinfo + "@" + host + "/0"}, reached},
			{"redis without scheme", nil, []string{"list", "-redis", "usr:" + pw + "@" + host}, badAddr},
			{"redis by variable", []string{envRedis + "=redis://" + userinfo + "@" + host + "/0"}, []string{"list"}, reached},
			{"postgres URL", nil, []string{"list", "-postgres", "postgres://usr:" + pw + "@" + host + "/db"}, want{}},
			{"postgres URL escaped", nil, []string{"list", "-postgres", "postgres://" + userinfo + "@" + host + "/db"}, reached},
			{"postgres keywords", nil, []string{"list", "-postgres", "host=127.0.0.1 port=" + port + " user=usr password=" + keywordQuote(pw)}, reached},
			{"postgres by variable", []string{envPostgres + "=postgres://" + userinfo + "@" + host + "/db"}, []string{"list"}, reached},
			{"sqlserver URL", nil, []string{"list", "-sqlserver", "sqlserver://usr:" + pw + "@" + host + "?database=test"}, want{}},
			{"sqlserver URL escaped", nil, []string{"list", "-sqlserver", "sqlserver://" + userinfo + "@" + host + "?database=test"}, reached},
			{"sqlserver ADO", nil, []string{"list", "-sqlserver", "server=127.0.0.1;port=" + port + ";user id=usr;password=" + pw}, want{}},
			{"mysql DSN", nil, []string{"list", "-mysql", "usr:" + pw + "@tcp(" + host + ")/db"}, want{}},
			{"mysql by variable", []string{envMySQL + "=usr:" + pw + "@tcp(" + host + ")/db"}, []string{"list"}, want{}},
			{"etcd URL", nil, []string{"list", "-etcd", "http://root:" + pw + "@" + host}, badAddr},
			{"etcd URL escaped", nil, []string{"list", "-etcd", "https://" + url.UserPassword("root", pw).String() + "@" + host}, badAddr},
			{"etcd without scheme", nil, []string{"list", "-etcd", "root:" + pw + "@" + host}, badAddr},
			{"etcd second endpoint", []string{envEtcd + "=" + host + ", http://root:" + pw + "@" + host}, []string{"list"}, badAddr},
			{"DSN as a NAME", nil, []string{"inspect", "-postgres", "postgres://" + userinfo + "@" + host + "/db", "postgres://usr:" + pw + "@" + host, "x"}, usage},
			{"keywords as an argument", nil, []string{"list", "-redis", host, "host=h password=" + keywordQuote(pw)}, usage},
			{"DSN as the command", nil, []string{"postgres://usr:" + pw + "@" + host + "/db"}, usage},
			{"DSN as a flag value", nil, []string{"list", "-redis", host, "-timeout", "postgres://usr:" + pw + "@" + host}, usage},
			{"DSN as a flag=value", nil, []string{"list", "-redis", host, "-timeout=redis://usr:" + pw + "@" + host}, usage},
		}
		if pw == passwords[0] || pw == "a" {
			cases = append(cases,
				tc{"postgres silent", nil, []string{"list", "-timeout", "300ms", "-postgres", "postgres://" + userinfo + "@127.0.0.1:" + silent.port() + "/db"}, reached},
				tc{"mysql silent", nil, []string{"list", "-timeout", "300ms", "-mysql", "usr:" + pw + "@tcp(127.0.0.1:" + silent.port() + ")/db"}, reached},
				tc{"redis silent", nil, []string{"list", "-timeout", "300ms", "-redis", "redis://" + userinfo + "@127.0.0.1:" + silent.port()}, reached})
		}
		for _, c := range cases {
			t.Run(strconv.Quote(pw)+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				r := run(t, "", c.env, c.args...)
				out := r.stdout + r.stderr
				if leaked(out, pw) {
					t.Errorf("the password %q was printed:\n%s", pw, out)
				}
				w := c.want
				if w.code == 0 { // a URL as written: parsed or not, depending on the characters
					w = want{exitFailure, reached.in}
					if !strings.Contains(r.stderr, "cannot reach") {
						w = badAddr
					}
				}
				found := false
				for _, s := range w.in {
					found = found || strings.Contains(r.stderr, s)
				}
				if r.code != w.code || !found {
					t.Errorf("exit %d, stderr %q; want %d and one of %q", r.code, r.stderr, w.code, w.in)
				}
				if strings.Contains(r.stderr, "cannot reach") && !strings.Contains(r.stderr, "at 127.0.0.1:") {
					t.Errorf("the message does not name the host: %q", r.stderr)
				}
			})
		}
	}
}
