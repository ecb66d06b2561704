package main

import (
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// workerProc is the parent's end of one worker.
type workerProc struct {
	enc  *gob.Encoder
	dec  *gob.Decoder
	in   io.Closer
	pid  int // 0 for an in-process worker
	wait func() error
}

// launcher starts workers.
type launcher interface {
	launch(ctx context.Context) (*workerProc, error)
}

// execLauncher starts each worker as a process: this binary again, with
// -worker. Its stderr is passed through.
type execLauncher struct{}

func (execLauncher) launch(ctx context.Context) (*workerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-worker")
	cmd.Stderr = os.Stderr
	// A worker must not outlive a parent that dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	return &workerProc{enc: gob.NewEncoder(in), dec: gob.NewDecoder(out), in: in, pid: cmd.Process.Pid, wait: cmd.Wait}, nil
}

// inProcessLauncher runs each worker as goroutines of this process, over
// pipes: the same protocol, for tests and for chaos-free runs of one
// process. Several in-process workers share nothing but the store.
type inProcessLauncher struct{}

func (inProcessLauncher) launch(ctx context.Context) (*workerProc, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runWorker(ctx, inR, outW)
		_ = outW.CloseWithError(err) // nil: the reader sees io.EOF
		_ = inR.Close()
		done <- err
	}()
	return &workerProc{enc: gob.NewEncoder(inW), dec: gob.NewDecoder(outR), in: inW, wait: func() error { return <-done }}, nil
}
