// Command leasehold is the administration tool of leasehold stores: it lists
// and inspects the live leases of a Redis, PostgreSQL, SQL Server, MySQL or etcd store,
// ends a lease by force (fencing its holder) and watches grants, releases and
// expiries as they happen.
//
// Run "leasehold -h" for usage. Exit codes: 0 ok, 1 failure, 2 usage.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		open:   openStore,
	}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// app is one run of the command, with its inputs and outputs (tests run it
// in-process with their own).
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// open connects to the selected store.
	open func(ctx context.Context, t target) (*store, error)
}
