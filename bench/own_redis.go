package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ownRedis is a redis-server the bench starts itself, on a free loopback
// port and without persistence, so that chaos can restart it; the shared
// server other programs use is never touched.
type ownRedis struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// startOwnRedis starts redis-server (from PATH) on a free loopback port.
func startOwnRedis(ctx context.Context) (*ownRedis, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &ownRedis{port: port}
	return r, r.start(ctx)
}

func (r *ownRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *ownRedis) start(ctx context.Context) error {
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning")
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(r.cmd, r.done)
	c := goredis.NewClient(&goredis.Options{Addr: r.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			r.stop()
			return fmt.Errorf("redis-server on %s did not answer: %w", r.addr(), err)
		}
		select {
		case <-r.done:
			return errors.New("redis-server exited at start")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitOlderThan waits until the server is past a restart grace of grace: the
// Redis backend's scripts count the server's age in whole seconds of
// uptime_in_seconds and add one second (see backend/redis/scripts/CONTRACT.md).
func (r *ownRedis) waitOlderThan(ctx context.Context, grace time.Duration) error {
	c := goredis.NewClient(&goredis.Options{Addr: r.addr(), MaxRetries: -1})
	defer c.Close()
	for {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("redis-server on %s: INFO: %w", r.addr(), err)
		}
		up := 0
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "uptime_in_seconds:"); ok {
				up, _ = strconv.Atoi(v)
			}
		}
		if time.Duration(up)*time.Second >= grace+time.Second {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop kills the server (losing its data, as a crash would) and waits for it.
func (r *ownRedis) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// restart kills the server, keeps it down for down, and starts it again on
// the same port, empty.
func (r *ownRedis) restart(ctx context.Context, down time.Duration) error {
	r.stop()
	time.Sleep(down) // the outage being simulated, not a synchronisation
	return r.start(ctx)
}
