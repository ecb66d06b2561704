// Command bench is leasehold's contention benchmark: it runs leasehold and
// other lock libraries side by side, through one harness and one safety
// checker, against the same server, and reports hand-off latency, fairness,
// throughput and safety across OS processes.
//
//	go -C bench run .                                     # memory backend, one process
//	go -C bench run . -backend redis -procs 8 -goroutines 4 -keys 1
//	go -C bench run . -backend redis -procs 1,2,4,8 -report out/   # sweep, charts
//	go -C bench run . -backend redis -procs 4 -chaos restart,cut,pause,kill
//	go -C bench run . -backend mysql -procs 4 -chaos restart,cut,pause,kill
//	go -C bench run . -backend redis -procs 8 -repeat 5 -report out/  # median, min–max
//	go -C bench run . -replot out/                                   # table and charts again
//
// (from the repository's root: the bench is a module of its own, so that its
// peers and chart libraries stay out of the library's module graph).
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
// Fallback wakes are the grants leasehold's engine counts under
// "leasehold.handoffs" with "leasehold.handoff.via" = "poll": a waiter got
// the name by its own poll (after an expiry or a lost notice) rather than by
// a hand-off notice ("notice"). Each worker reads the counter through an
// OpenTelemetry ManualReader (every other instrument is dropped) and the
// parent sums them; a peer has none (0), an engine without the counter
// gives "n/a".
//
// # Repetitions, verdicts and charts
//
// -repeat N runs each lock at each -procs N times, the locks taking turns.
// The table shows each configuration's median, then the spread (lowest and
// highest run); results.json keeps every run (Runs) with the summaries.
//
// Below the table, one line per leasehold configuration judges it against
// the hand-off targets (verdict.go holds them): throughput at
// least 1.3× the better peer's, hand-off p50 at most 0.25 ms and p99 at most
// 1 ms, at most 2.5 round trips per grant, Jain at least 0.98 with the
// smallest share at least 0.8 of the fair one, CPU per grant at most 1.5×
// the most frugal peer's, and no overlap or fencing refusal. It names each
// target missed, or says which it could not judge (no peer at that
// procs×g).
//
// -report writes results.json and, with -replot from it again:
// throughput.png, handoff.png and handoff-p99.png (against the number of
// contenders, a line per lock through the medians, bars from the lowest to
// the highest run, the target as a dashed line; each axis fitted to its
// data, logarithmic only when the values span more than 20×), fairness.png
// (at the highest contention, each contender's grants ÷ the fair share,
// sorted from the least served, with the Jain index and smallest share per
// lock) and safety.png (a table per lock: overlaps, refused fenced writes,
// fallback wakes).
//
// # Semaphores
//
// -limit n (default 1) lets up to n holders hold a name at once: leasehold
// acquires with WithLimit(n), on a backend whose Info.MaxLimit allows it
// (otherwise the workers refuse to start, naming the backend's limit). No
// peer has a semaphore: above 1 they are left out of the default
// contenders (the output says so), and naming one in -locks is refused.
// The unsafe lock becomes a broken semaphore: n slots, each taken by check,
// then set.
//
// The checker and the measures generalise; with n = 1 each is the rule
// above:
//
//   - An overlap is a holding that began while n holdings of its name were
//     live: a sweep over the intervals sorted by start, keeping the live
//     ones (a holding that ends as another begins is not live then).
//   - The shared record is not written: with n holders writing at once, its
//     newest token would refuse the older, legitimate ones. The checker
//     verifies the tokens from the intervals instead. Tokens increase
//     across all holders in the order the store grants them, so a
//     holding's token must be above the token of every holding of the name
//     whose grant returned before this holding's acquire was called (that
//     grant came first), and no two holdings of a name may share a token.
//     Grants whose acquires overlapped in time may return in either order:
//     for them only distinct tokens are checked. A holding that breaks
//     either rule is a token-order violation, counted where the fencing
//     refusals are with n = 1 (and, like them, not a reason to exit 1).
//   - Hand-off latency: a release counts when the name was full at it (n
//     holdings live, this one included, or on their way to waiters: slots
//     freed by earlier counted releases and not granted again yet) and
//     another contender was waiting for it (asked before the release,
//     granted after). Each counted release is paired with the next grant of
//     the name not paired with an earlier one, the oldest release first;
//     the hand-off is the gap between them.
//   - Utilisation, per name: the time-averaged number of its live holdings
//     over the run ÷ n, from the holdings' intervals (the holders' view,
//     from the grant's return to the last act before the release: the
//     store's slot is taken a little longer). The table shows name 0's,
//     results.json the first 16 names'.
//   - Throughput, acquire latency, Jain's index over the contenders and
//     round trips per grant are measured as with n = 1.
//
// The table has no "vs leasehold" columns above 1 (no peer), but the hot
// name's utilisation (util) and round trips per grant (RT/grant); the
// verdicts judge what needs no peer; the charts are drawn as with n = 1,
// the safety panel counting tokens out of order.
//
// # Chaos
//
// -chaos spreads its actions over each run: restart (the bench's own
// redis-server, killed and started empty; on -backend mysql the bench's own
// MariaDB, on a free loopback port with a data directory under a temporary
// directory, killed with SIGKILL and started again on its data), cut (every
// connection of the contenders), pause (SIGSTOP a process that holds a name, for 1.5×TTL) and
// kill (SIGKILL a process that waits for the hot name, name 0, and holds
// none). After a kill the run goes on with the other processes: the killed
// one's record dies with it, so its holdings are neither checked nor
// counted and its contenders leave the fairness figures, and the store must
// get over its pending acquisitions (a queue entry, or a hand-off it will
// never pick up). The record shows what a process waits for and holds, not
// a grant on its way back to it: the chaos log says whether another process
// held a name at the kill (if none did, such a grant may have been lost
// with the process, and the name stays taken until it expires). kill needs
// worker processes (-procs 2 or more, no -inprocess).
//
// Go benchmarks (testing.B) for per-operation figures live in the _test.go
// files of this package; run them with go test -bench and compare with
// benchstat.
package main
