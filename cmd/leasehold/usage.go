package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

const synopsis = `usage: leasehold COMMAND [flags] [NAME]

  leasehold list -postgres "$DATABASE_URL" -prefix billing/
  leasehold release -force -redis 127.0.0.1:6379 invoice-run

Commands:
  list     [-prefix P]            live leases whose name starts with P, as a table (or -json)
  inspect  NAME                   who holds NAME: owner, token, time left, metadata ("free" if nobody)
  release  -force [-yes] [-token T] NAME
                                  end NAME's lease by force: its holder is fenced (its next
                                  renewal is rejected and it loses the lease with ReasonRejected;
                                  its token is never issued again). Asks first unless -yes;
                                  with -token, only the holding with token T.
  watch    [-prefix P]            stream grants, releases and expiries until interrupted
                                  (SIGINT, SIGTERM) or for -for DURATION

Flags of every command:
  -json                print JSON instead of text
  -timeout D           bound on connecting and on each store call (default 10s)
  -key-prefix P        the Manager's leasehold.WithKeyPrefix: names are given and shown without it

Store (exactly one; a flag wins over the environment, where exactly one of
LEASEHOLD_REDIS_ADDR, LEASEHOLD_POSTGRES_DSN, LEASEHOLD_SQLSERVER_DSN,
LEASEHOLD_MYSQL_DSN and LEASEHOLD_ETCD_ENDPOINTS may be set):
  -redis ADDR          host:port or redis://[user:password@]host:port[/db] (rediss:// for TLS)
  -postgres DSN        a libpq URL or key=value string (PG* variables apply)
  -sqlserver DSN       a go-mssqldb connection string
  -mysql DSN           MySQL or MariaDB: user[:password]@tcp(host:port)/[database]
  -etcd ENDPOINTS      host:port or http(s)://host:port, comma-separated
-redis-prefix, -etcd-prefix, -schema and -table must match the backend options
the Managers use. Passwords are never printed: prefer the environment to the
command line, where other users can read them.

Names are store keys as Managers write them: a Manager built with
leasehold.WithKeyPrefix(P) writes P+NAME, so pass -key-prefix P to use its names.

Exit codes: 0 ok (inspect or release of a free name included, with -token
too), 1 failure (store unreachable or failing, release not confirmed or
interrupted at the prompt, the name held with another token than -token or
than the one shown, a release whose answer was lost), 2 usage (refused before
any connection: bad flags or arguments, an address that cannot be parsed).

Run 'leasehold COMMAND -h' for the flags of a command.
`

// printHelp writes the whole help: the synopsis, then the flags of command
// (when given).
func printHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	io.WriteString(w, synopsis)
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nleasehold %s %s\n  %s\n\nFlags:\n", c.name, c.args, c.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// usageError is a bad command line or store address: reported with exit
// code 2, before any connection is made.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// parseInterspersed parses flags wherever they are among the positional
// arguments ("inspect NAME -postgres DSN" works), until "--", after which
// everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// oneLine makes s safe to print on one line of a terminal: control
// characters (newlines, tabs, escape sequences) and invalid UTF-8 are shown
// escaped, so that a name or metadata cannot forge output or drive the
// terminal.
func oneLine(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\uFFFD' && strings.HasPrefix(s[i:], "\uFFFD") == false:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029':
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-1]) + "…"
}
