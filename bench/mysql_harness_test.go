package main

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// testMySQLDSN is LEASEHOLD_MYSQL_DSN (default: the local test server); the
// test is skipped when it cannot connect, or fails with
// LEASEHOLD_REQUIRE_SERVICES=1.
func testMySQLDSN(t *testing.T) string {
	t.Helper()
	dsn := envOr("LEASEHOLD_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test")
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("LEASEHOLD_MYSQL_DSN does not parse: %v", err)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err == nil {
		return dsn
	}
	if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
		t.Fatalf("no MySQL at %s: %v", cfg.Addr, err)
	}
	t.Skipf("no MySQL at %s: %v; set LEASEHOLD_REQUIRE_SERVICES=1 to fail instead", cfg.Addr, err)
	return ""
}

// Leasehold on MySQL in two processes, exclusive and with a limit of 3.
func TestMySQLContenders(t *testing.T) {
	dsn := testMySQLDSN(t)
	for _, limit := range []int{1, 3} {
		c := testConfig(t, backendMySQL, lockLeasehold, 2, 2, 700*time.Millisecond)
		c.MySQLDSN, c.Limit = dsn, limit
		r := mustRun(t, c, execLauncher{})
		if r.Acquisitions == 0 || r.Safety.Overlaps != 0 || r.Safety.Rejections != 0 {
			t.Fatalf("limit %d: %d acquisitions, %d overlaps %+v, %d rejections", limit, r.Acquisitions, r.Safety.Overlaps, r.Safety.OverlapSamples, r.Safety.Rejections)
		}
	}
}

// Chaos on the bench's own MariaDB: a crash and restart, a cut of every
// connection, a paused holder and a killed waiter all happen, and the run
// is still checked. A restarted MariaDB keeps what it acknowledged, and a
// paused holder loses its lease before its TTL runs out on the server, so
// no holdings overlap and no token goes back.
func TestChaosMySQL(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos takes a few seconds")
	}
	if _, err := serverBinary("mariadbd", "mysqld"); err != nil {
		if os.Getenv("LEASEHOLD_REQUIRE_SERVICES") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a stuck server
	defer cancel()
	f := &cliFlags{base: runConfig{Backend: backendMySQL}, chaos: []string{chaosRestart, chaosCut, chaosPause, chaosKill}}
	cfg := testConfig(t, backendMySQL, lockLeasehold, 3, 1, 3*time.Second)
	cfg.TTL = 500 * time.Millisecond
	plan, cleanup, err := setUpChaos(ctx, f, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if plan.mysql == nil || !strings.Contains(cfg.MySQLDSN, plan.proxy.Addr()) {
		t.Fatalf("contenders must dial the proxy in front of the bench's own server: %q", cfg.MySQLDSN)
	}
	r, err := runOne(ctx, cfg, runOptions{launcher: execLauncher{}, chaos: plan})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Chaos) != 4 {
		t.Fatalf("chaos log %q, want 4 actions", r.Chaos)
	}
	for i, want := range []string{"restart: MariaDB killed", "cut: ", "pause: process ", "kill: "} {
		if !strings.Contains(r.Chaos[i], want) {
			t.Errorf("chaos %d: %q, want %q", i, r.Chaos[i], want)
		}
	}
	t.Logf("chaos: %q; %d acquisitions, %d checked, errors %q", r.Chaos, r.Acquisitions, r.Safety.HoldingsChecked, r.Errors)
	if r.Safety.HoldingsChecked == 0 {
		t.Error("no holding was checked")
	}
	if r.Safety.Overlaps != 0 || r.Safety.Rejections != 0 {
		t.Errorf("overlaps %d %+v, fencing rejections %d %+v", r.Safety.Overlaps, r.Safety.OverlapSamples, r.Safety.Rejections, r.Safety.RejectSamples)
	}
}
