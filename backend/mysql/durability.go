package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNotDurable is returned (wrapped) by EnsureSchema and by the first
// Acquire of a Backend when the server can acknowledge a commit that a crash
// then loses: innodb_flush_log_at_trx_commit is not 1, or the binary log is
// on and sync_binlog is not 1. A lost grant would let a later grant repeat
// its fencing token and hand the name to a second holder.
var ErrNotDurable = errors.New("mysql: the server can lose acknowledged commits (set innodb_flush_log_at_trx_commit = 1, and sync_binlog = 1 when the binary log is on)")

// ErrServerVersion is returned (wrapped) by EnsureSchema and by the first
// Acquire when the server is older than MySQL 8.0 or MariaDB 10.3, which may
// restart an AUTO_INCREMENT counter below tokens already issued.
var ErrServerVersion = errors.New("mysql: the server is older than MySQL 8.0 or MariaDB 10.3, whose AUTO_INCREMENT counters survive a restart")

// serverSQL reads the settings that make commits durable, and the version.
const serverSQL = `SELECT @@GLOBAL.innodb_flush_log_at_trx_commit, @@GLOBAL.log_bin, @@GLOBAL.sync_binlog, VERSION()`

// checkServer returns ErrNotDurable or ErrServerVersion when the server
// could repeat a fencing token after a crash.
func checkServer(ctx context.Context, db *sql.DB) error {
	var flush, logBin, syncBinlog int64
	var version string
	if err := db.QueryRowContext(ctx, serverSQL).Scan(&flush, &logBin, &syncBinlog, &version); err != nil {
		return fmt.Errorf("reading the server's durability settings: %w", err)
	}
	if flush != 1 {
		return fmt.Errorf("%w: innodb_flush_log_at_trx_commit is %d", ErrNotDurable, flush)
	}
	if logBin != 0 && syncBinlog != 1 {
		return fmt.Errorf("%w: the binary log is on and sync_binlog is %d", ErrNotDurable, syncBinlog)
	}
	if !versionKeepsCounters(version) {
		return fmt.Errorf("%w: VERSION() is %q", ErrServerVersion, version)
	}
	return nil
}

// versionKeepsCounters reports whether a server of VERSION() v keeps
// AUTO_INCREMENT counters durable: MySQL 8.0 and later, MariaDB 10.3 and
// later (the first stable series with them).
func versionKeepsCounters(v string) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return major > 10 || major == 10 && minor >= 3
	}
	return major >= 8
}
