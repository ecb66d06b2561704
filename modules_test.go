package leasehold_test

import (
	"os"
	"strings"
	"testing"
)

// Modules a program that uses only the library and backend/memory must not
// pull in through the root module: the networked stores' drivers (each is
// required by the backend's own module: backend/redis, backend/postgres,
// backend/sqlserver, backend/mysql, backend/etcd) and the test tools (required by the
// modules whose tests use them). goleak is the one test tool the root
// module requires: every test package of the library checks for leaked
// goroutines with it.
var notInTheRootModule = []string{
	"github.com/jackc/pgx",
	"github.com/lib/pq",
	"github.com/microsoft/go-mssqldb",
	"github.com/denisenkom/go-mssqldb",
	"github.com/go-sql-driver/mysql",
	"github.com/redis/go-redis",
	"github.com/go-redis/redis",
	"go.etcd.io/etcd",
	"github.com/DATA-DOG/go-sqlmock",
	"github.com/Shopify/toxiproxy",
	"google.golang.org/grpc",
}

// TestRootModuleRequiresNoStoreDriver: the root go.mod requires none of the
// store drivers and test tools above, directly or as an indirect
// requirement it records.
func TestRootModuleRequiresNoStoreDriver(t *testing.T) {
	src, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	reqs := goModRequires(string(src))
	if len(reqs) == 0 {
		t.Fatal("go.mod has no require; is it parsed right?")
	}
	for _, r := range reqs {
		for _, bad := range notInTheRootModule {
			if r == bad || strings.HasPrefix(r, bad+"/") {
				t.Errorf("go.mod requires %s: a store driver or test tool belongs to the module that uses it (see docs/adding-a-backend.md)", r)
			}
		}
	}
}

// goModRequires returns the module paths of a go.mod's require directives,
// in both forms (require x v, and a require block).
func goModRequires(src string) []string {
	var out []string
	inBlock := false
	for line := range strings.Lines(src) {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case inBlock && f[0] == ")":
			inBlock = false
		case inBlock:
			out = append(out, f[0])
		case f[0] == "require" && len(f) > 1 && f[1] == "(":
			inBlock = true
		case f[0] == "require" && len(f) > 2:
			out = append(out, f[1])
		}
	}
	return out
}
