// Command bench is leasehold's contention benchmark: it runs leasehold and
// other lock libraries side by side, through one harness and one safety
// checker, against the same server, and reports hand-off latency, fairness,
// throughput and safety across OS processes.
//
//	go run ./bench                                   # memory backend, one process
//	go run ./bench -backend redis -procs 8 -goroutines 4 -keys 1
//	go run ./bench -backend redis -procs 1,2,4,8 -report out/   # sweep, charts
//	go run ./bench -backend redis -procs 4 -chaos restart,cut,pause
//
// The parent process starts the worker processes itself (the same binary,
// re-executed with -worker), hands each its configuration, starts them
// together and collects their records when the run ends.
//
// # Safety checker
//
// Every holder, while it believes it holds a name, writes its fencing token
// into a record shared by all processes (a memory-mapped file whose slots only
// accept a token at least as high as the highest seen; a lower one is a
// fencing rejection), and records its holding interval on CLOCK_MONOTONIC,
// which every process on one machine shares. The parent sorts the intervals
// of each name and reports every overlap: any overlap for leasehold makes the
// command exit non-zero (a peer's overlaps are reported as findings). The
// -locks unsafe contender is a deliberately broken lock (check, then set)
// that shows the checker catching overlaps.
//
// # Measures
//
// Acquisitions per second (total and per name), acquire latency (call to
// grant), hand-off latency (the holder's release call to the grant of a
// contender that was already waiting), Jain's fairness index over contenders
// with the smallest and largest share, waiter wake-ups by notification or by
// poll, backend round trips per acquisition, failures and losses by reason, and
// the CPU time and peak resident memory of the workers.
//
// Go benchmarks (testing.B) for per-operation figures live in the _test.go
// files of this package; run them with go test -bench and compare with
// benchstat.
package main
