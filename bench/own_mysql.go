package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// ownMySQL is a MariaDB (or MySQL) server the bench starts itself, on a free
// loopback port with a data directory of its own under a temporary
// directory, so that chaos can crash and restart it; the shared server other
// programs use is never touched. It runs without grant tables (any user
// connects) and with the durability settings the backend requires.
type ownMySQL struct {
	dir    string
	server string // mariadbd or mysqld
	port   int
	cmd    *exec.Cmd
	done   chan struct{}
}

// serverBinary finds name on PATH or in /usr/sbin, where distributions put
// the server.
func serverBinary(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
		if p := filepath.Join("/usr/sbin", n); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %v on PATH or in /usr/sbin (run .ci/ensure-mariadb)", names)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// startOwnMySQL initialises a data directory and starts the server on a
// free loopback port.
func startOwnMySQL(ctx context.Context) (_ *ownMySQL, err error) {
	server, err := serverBinary("mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	install, err := serverBinary("mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "leasehold-bench-mysql-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	args := append([]string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--skip-test-db",
		"--auth-root-authentication-method=normal"}, asRoot()...)
	if out, err := exec.CommandContext(ctx, install, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", filepath.Base(install), err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	m := &ownMySQL{dir: dir, server: server, port: port}
	return m, m.start(ctx)
}

// asRoot is the option a server run by root needs (it refuses root
// otherwise).
func asRoot() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

func (m *ownMySQL) addr() string { return "127.0.0.1:" + strconv.Itoa(m.port) }

// dsn is the server's DSN for the bench (no password: no grant tables).
func (m *ownMySQL) dsn() string { return "root@tcp(" + m.addr() + ")/" }

func (m *ownMySQL) start(ctx context.Context) error {
	args := append([]string{"--no-defaults", "--datadir=" + filepath.Join(m.dir, "data"),
		"--port=" + strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--socket=" + filepath.Join(m.dir, "sock"),
		"--pid-file=" + filepath.Join(m.dir, "pid"), "--log-error=" + filepath.Join(m.dir, "error.log"),
		"--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin",
		"--innodb-flush-log-at-trx-commit=1", "--innodb-buffer-pool-size=32M"}, asRoot()...)
	m.cmd = exec.Command(m.server, args...)
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", filepath.Base(m.server), err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(m.cmd, m.done)
	cfg, _ := mysqldrv.ParseDSN(m.dsn())
	cfg.Timeout, cfg.Logger = time.Second, quietDriver{}
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		m.kill()
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			m.kill()
			return fmt.Errorf("%s on %s did not answer (log in %s): %w", filepath.Base(m.server), m.addr(), m.dir, err)
		}
		select {
		case <-m.done:
			log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
			return fmt.Errorf("%s exited at start:\n%s", filepath.Base(m.server), log)
		case <-time.After(50 * time.Millisecond): // no signal tells when it listens
		}
	}
}

// kill kills the server (SIGKILL, as a crash would: what it acknowledged
// must survive) and waits for it.
func (m *ownMySQL) kill() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.done
}

// stop kills the server and removes its data directory.
func (m *ownMySQL) stop() {
	m.kill()
	_ = os.RemoveAll(m.dir)
}

// restart crashes the server, keeps it down for down, and starts it again
// on the same port and data: InnoDB recovers every acknowledged commit.
func (m *ownMySQL) restart(ctx context.Context, down time.Duration) error {
	m.kill()
	time.Sleep(down) // the outage being simulated, not a synchronisation
	if err := m.start(ctx); err != nil {
		return errors.Join(err, errors.New("the server did not come back"))
	}
	return nil
}
