//go:build unix

package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ttyWidth returns the width of the terminal w writes to, or 0 when w is
// not a terminal.
func ttyWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
