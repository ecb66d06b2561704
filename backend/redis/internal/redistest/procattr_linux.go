package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill the process when the test process dies,
// so that a test binary killed before its cleanups ran (a -timeout panic, a
// SIGKILL) leaves no redis-server behind.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
