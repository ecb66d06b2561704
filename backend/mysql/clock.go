package mysql

import "time"

// micros is d in whole microseconds, rounded up.
func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

// toTime is a time in microseconds since the Unix epoch on the server's UTC
// clock.
func toTime(us int64) time.Time { return time.UnixMicro(us).UTC() }

// until is how long after now (both on the server's clock) us is.
func until(us, now int64) time.Duration { return time.Duration(us-now) * time.Microsecond }
