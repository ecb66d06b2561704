package main

import (
	"os/exec"
	"syscall"
)

// dieWithTests makes cmd killed when the test process dies, even by a
// panic or a signal that skips the cleanups.
func dieWithTests(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
