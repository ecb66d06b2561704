//go:build !linux

package redistest

import "os/exec"

// dieWithTest does nothing here: only Linux has a parent-death signal. The
// processes are still killed in t.Cleanup.
func dieWithTest(*exec.Cmd) {}
