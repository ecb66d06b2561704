package main

import "golang.org/x/sys/unix"

// monoNow reads CLOCK_MONOTONIC in nanoseconds. Unlike Go's own monotonic
// readings it is one clock for every process of the machine, so holding
// intervals recorded by different workers can be compared.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC cannot fail on Linux; a checker on a broken clock
		// would prove nothing, so stop loudly.
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
