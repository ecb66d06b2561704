package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// runResult is the outcome of one run of one lock, as reported.
type runResult struct {
	Lock       string
	Backend    string
	Procs      int
	Goroutines int
	Contenders int
	Keys       int
	Dist       string
	ZipfS      float64 `json:",omitempty"`
	// Rep numbers the repetitions of one configuration (-repeat), from 1;
	// 0 in records written before -repeat existed.
	Rep          int `json:",omitempty"`
	HoldMs       float64
	ThinkMs      float64
	TTLMs        float64
	Wait         string
	Seconds      float64
	Acquisitions int
	PerSecond    float64
	// PerKeyPerSecond is acquisitions per second of each name (by number),
	// for the first 16 names.
	PerKeyPerSecond []float64
	Acquire         latency // call to grant, ms
	HandOff         latency // previous holder's release to this grant, ms
	// WaiterHandOff is HandOff for grants to a contender that had been
	// waiting since before the previous holder's grant (a queued waiter).
	WaiterHandOff latency
	Fairness      fairness
	// Shares are each contender's grants ÷ the fair share (1 = even), in
	// contender order; killed processes' contenders are left out.
	Shares  []float64 `json:",omitempty"`
	Wakeups struct{ Notify, Poll, Notifications uint64 }
	// Handoffs are the engine's grants to waiters by notice and by poll
	// (fallback wakes), summed over the workers; nil when not counted
	// ("n/a"), zero for a peer, which hands nothing off.
	Handoffs *handoffCounts `json:",omitempty"`
	// RoundTripsPerAcq is store calls (acquire, renew, release, and failed
	// attempts) per successful acquisition.
	RoundTripsPerAcq float64
	Failures         map[string]uint64 // failed acquires and losses, by reason
	Safety           safety
	CPUSeconds       float64 // all workers, user + system
	MaxRSSMiB        float64 // the largest worker's peak
	Errors           []string
	Chaos            []string // what chaos did, in order
	// Killed are the worker processes chaos killed whose records were lost
	// with them: their holdings are not checked or counted.
	Killed []int `json:",omitempty"`
	// Peer is true for another library (its violations are findings, not a
	// failure of the run).
	Peer bool
	// Limit is the run's -limit when above 1 (a semaphore); 0 for an
	// exclusive lock.
	Limit int `json:",omitempty"`
	// Utilisation is, with a limit above 1, each of the first 16 names'
	// time-averaged number of holders ÷ Limit (see utilisation).
	Utilisation []float64 `json:",omitempty"`
}

// limit is the run's limit of holders per name, at least 1.
func (r *runResult) limit() int { return max(r.Limit, 1) }

// failed reports whether this run breaks the safety promise it is held to.
func (r *runResult) failed() bool { return !r.Peer && r.Safety.Overlaps > 0 }

// runOptions are the parent's settings beyond the workers' configuration.
type runOptions struct {
	launcher launcher
	progress io.Writer // nil: no progress line
	// progressTTY redraws the progress line every second; without it
	// (progress is a file or a pipe) one plain line per run is written.
	progressTTY bool
	chaos       *chaosPlan
}

// runOne runs cfg: it starts cfg.Procs workers, starts them together, lets
// chaos (if any) act, collects their records and checks them.
func runOne(ctx context.Context, cfg runConfig, o runOptions) (*runResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lhbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg.RecordPath = filepath.Join(dir, "record")
	if err := createRecord(cfg.RecordPath, cfg.Keys, cfg.Procs); err != nil {
		return nil, err
	}
	rec, err := openRecord(cfg.RecordPath, cfg.Keys, cfg.Procs)
	if err != nil {
		return nil, err
	}
	defer rec.close()

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var procs []*workerProc
	defer func() {
		cancel()
		for _, p := range procs {
			_ = p.in.Close()
			_ = p.wait()
		}
	}()
	for i := range cfg.Procs {
		p, err := o.launcher.launch(wctx)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		if err := p.enc.Encode(workerHello{Config: cfg, Proc: i}); err != nil {
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
	}
	for i, p := range procs {
		var m workerMsg
		if err := p.dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("worker %d did not start: %w", i, err)
		}
		if !m.Ready {
			return nil, fmt.Errorf("worker %d: %s", i, m.Err)
		}
	}
	start := monoNow() + int64(50*time.Millisecond)
	end := start + int64(cfg.Duration)
	for i, p := range procs {
		if err := p.enc.Encode(workerStart{Start: start, End: end}); err != nil {
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
	}
	stopSide := make(chan struct{})
	sideDone := make(chan struct{})
	var chaosLog []string
	killed := &procSet{}
	go func() {
		defer close(sideDone)
		pids := make([]int, len(procs))
		for i, p := range procs {
			pids[i] = p.pid
		}
		if o.chaos != nil {
			chaosLog = o.chaos.run(stopSide, cfg, rec, pids, killed, start, end)
		}
	}()
	progDone := make(chan struct{})
	go func() {
		defer close(progDone)
		showProgress(o.progress, o.progressTTY, stopSide, cfg, rec, start, end)
	}()

	var results []*workerResult
	var lost []int
	for i, p := range procs {
		var m workerMsg
		err := p.dec.Decode(&m)
		if err != nil && killed.has(i) {
			// Chaos killed it on purpose (marking it first): the run goes
			// on without its record.
			lost = append(lost, i)
			continue
		}
		if err != nil {
			close(stopSide)
			<-sideDone
			<-progDone
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		if m.Result == nil {
			close(stopSide)
			<-sideDone
			<-progDone
			return nil, fmt.Errorf("worker %d: %s", i, m.Err)
		}
		results = append(results, m.Result)
	}
	close(stopSide)
	<-sideDone
	<-progDone
	r := analyse(cfg, results, start, end)
	r.Chaos = chaosLog
	r.Killed = lost
	return r, nil
}

// showProgress writes a progress line (elapsed time, acquisitions so far)
// every second until stop is closed, redrawing it in place on a terminal
// (tty). Elsewhere it writes no control characters: one line when the run
// ends.
func showProgress(w io.Writer, tty bool, stop <-chan struct{}, cfg runConfig, rec *sharedRecord, start, end int64) {
	if w == nil {
		return
	}
	line := func() string {
		el := time.Duration(max(0, monoNow()-start)).Round(time.Second)
		return fmt.Sprintf("%s %d×%d: %v / %v, %d acquisitions", cfg.Lock, cfg.Procs, cfg.Goroutines,
			el, time.Duration(end-start), rec.progress())
	}
	if !tty {
		<-stop
		fmt.Fprintln(w, line())
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			fmt.Fprint(w, "\r\033[K")
			return
		case <-t.C:
			fmt.Fprint(w, "\r\033[K"+line())
		}
	}
}

// analyse turns the workers' records into a runResult.
func analyse(cfg runConfig, results []*workerResult, start, end int64) *runResult {
	d := time.Duration(end - start)
	r := &runResult{
		Lock: cfg.Lock, Backend: cfg.Backend, Procs: cfg.Procs, Goroutines: cfg.Goroutines, Contenders: cfg.contenders(),
		Keys: cfg.Keys, Dist: cfg.Dist, ZipfS: zipfS(cfg), Rep: cfg.Rep, HoldMs: ms(cfg.Hold), ThinkMs: ms(cfg.Think), TTLMs: ms(cfg.TTL), Wait: waitString(cfg.Wait),
		Seconds: d.Seconds(), Failures: map[string]uint64{},
		Peer: isPeer(cfg.Lock),
	}
	if r.Peer {
		r.Handoffs = &handoffCounts{} // a peer hands nothing off: no fallback either
	}
	var ivs []interval
	var rejections []fenceRejection
	var counts lockCounts
	counted := len(results) > 0 // every worker counted hand-offs
	// Contenders of the processes that reported: a killed process's are
	// neither served nor starved, they are gone.
	live := map[int]bool{}
	for _, w := range results {
		for g := range cfg.Goroutines {
			live[w.Proc*cfg.Goroutines+g] = true
		}
		counted = counted && w.Counts.Handoffs != nil
		ivs = append(ivs, w.Intervals...)
		rejections = append(rejections, w.Rejections...)
		counts.add(w.Counts)
		for k, v := range w.Failures {
			r.Failures[k] += v
		}
		for k, v := range w.Counts.Losses {
			r.Failures[k] += v
		}
		r.Errors = append(r.Errors, w.Errors...)
		r.CPUSeconds += w.CPU.Seconds()
		r.MaxRSSMiB = max(r.MaxRSSMiB, float64(w.MaxRSS)/(1<<20))
	}
	r.Acquisitions = len(ivs)
	r.PerSecond = float64(len(ivs)) / d.Seconds()
	perKey := make([]float64, min(cfg.Keys, 16))
	perWorker := make([]float64, cfg.contenders())
	acq := make([]time.Duration, 0, len(ivs))
	for _, iv := range ivs {
		if iv.Key < len(perKey) {
			perKey[iv.Key]++
		}
		perWorker[iv.Worker]++
		acq = append(acq, time.Duration(iv.Start-iv.Call))
	}
	perLive := make([]float64, 0, len(live))
	for w, n := range perWorker {
		if live[w] {
			perLive = append(perLive, n)
		}
	}
	for i := range perKey {
		perKey[i] /= d.Seconds()
	}
	r.PerKeyPerSecond = perKey
	r.Acquire = summarise(acq)
	all, waiters := handOffs(ivs, len(live), cfg.limit())
	r.HandOff, r.WaiterHandOff = summarise(all), summarise(waiters)
	r.Fairness = jain(perLive)
	r.Shares = shares(perLive)
	r.Wakeups.Notify, r.Wakeups.Poll, r.Wakeups.Notifications = counts.NotifyWakes, counts.PollWakes, counts.Notifications
	if counted && !r.Peer {
		r.Handoffs = counts.Handoffs
	}
	if len(ivs) > 0 {
		r.RoundTripsPerAcq = float64(counts.RoundTrips) / float64(len(ivs))
	}
	r.Safety = checkSafety(ivs, rejections, start, cfg.limit())
	if cfg.limit() > 1 {
		r.Limit = cfg.limit()
		r.Utilisation = utilisation(ivs, len(perKey), cfg.limit(), start, start+int64(d))
	}
	slices.Sort(r.Errors)
	r.Errors = slices.Compact(r.Errors)
	return r
}

// isPeer reports whether lock is another library (not leasehold, not the
// checker's unsafe self-test).
func isPeer(lock string) bool {
	return lock == lockRedislock || lock == lockRedsync || lock == lockPGLock
}

// zipfS is the zipf exponent when the run draws names by zipf, else 0.
func zipfS(c runConfig) float64 {
	if c.Dist == "zipf" {
		return c.ZipfS
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func waitString(w time.Duration) string {
	if w == waitForever {
		return "forever"
	}
	return w.String()
}

// errUnsafe is returned when a run that must be safe saw overlaps.
var errUnsafe = errors.New("safety violated: overlapping holdings")
