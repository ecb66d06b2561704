package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Two "processes" campaign for one job, each leading two short terms: the
// leadership alternates between them and the fencing tokens announced by
// successive leaders increase.
func TestLeadershipAlternatesWithIncreasingTokens(t *testing.T) {
	dsn := os.Getenv("LEASEHOLD_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := pgxpool.New(ctx, dsn)
	if err == nil {
		if err = admin.Ping(ctx); err != nil {
			admin.Close()
		}
	}
	if err != nil {
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatalf("PostgreSQL not reachable (LEASEHOLD_POSTGRES_DSN): %v", err)
		}
		t.Skipf("PostgreSQL not reachable (set LEASEHOLD_POSTGRES_DSN): %v", err)
	}
	defer admin.Close()
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	schema := "lh_example_" + hex.EncodeToString(r)
	defer admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")

	var out syncBuffer
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, owner := range []string{"alpha", "beta"} {
		c := config{postgresDSN: dsn, schema: schema, job: "report", owner: owner,
			ttl: 5 * time.Second, work: 100 * time.Millisecond, term: 300 * time.Millisecond, terms: 2}
		wg.Go(func() { errs <- run(ctx, c, &out) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
	}
	leaders := regexp.MustCompile(`(?m)^(\w+): LEADER of "report" with fencing token (\d+)$`).FindAllStringSubmatch(out.String(), -1)
	if len(leaders) != 4 {
		t.Fatalf("%d terms led, want 4:\n%s", len(leaders), out.String())
	}
	var last uint64
	changes := 0
	for i, l := range leaders {
		tok, _ := strconv.ParseUint(l[2], 10, 64)
		if tok <= last {
			t.Fatalf("term %d: token %d after %d:\n%s", i, tok, last, out.String())
		}
		last = tok
		if i > 0 && l[1] != leaders[i-1][1] {
			changes++
		}
	}
	if changes == 0 {
		t.Fatalf("leadership never changed hands:\n%s", out.String())
	}
	if bytes.Contains([]byte(out.String()), []byte("postgres://")) {
		t.Fatal("the output shows the connection string")
	}
}
