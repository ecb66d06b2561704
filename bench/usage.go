package main

import (
	"flag"
	"fmt"
)

// usageHead is what -h prints before the flags: a synopsis and two command
// lines to start from, so that nobody has to read the flag list first.
const usageHead = `Usage: go -C bench run . [flags]     (or a built binary: bench [flags])

Runs leasehold and other lock libraries side by side against one backend, in
several processes, checks that no two holders overlapped, and prints a table
(-format json or csv for every measure). Exit 1: leasehold overlapped.

Examples:
  go -C bench run .                                            # memory backend, no services
  go -C bench run . -backend redis -procs 1,2,4 -report out/   # vs redislock, redsync; charts

Flags:
`

// setUsage makes fs print usageHead, then its flags.
func setUsage(fs *flag.FlagSet) {
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
}
