package main

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The parent and a worker talk gob over the worker's stdin and stdout:
// parent → workerHello, worker → workerMsg{Ready}, parent → workerStart,
// worker → workerMsg{Result}.
type workerHello struct {
	Config runConfig
	Proc   int
}

// workerStart tells the workers when to start and stop, on CLOCK_MONOTONIC.
type workerStart struct{ Start, End int64 }

// workerMsg is one message from a worker.
type workerMsg struct {
	Ready  bool
	Err    string
	Result *workerResult
}

// interval is one holding as its holder saw it, on CLOCK_MONOTONIC (ns).
type interval struct {
	Key    int
	Worker int    // global contender number: proc*goroutines + goroutine
	Token  uint64 // 0 when the lock has none
	Call   int64  // acquire called
	Start  int64  // grant returned
	End    int64  // last moment the holder acted on its belief that it held
	Lost   bool   // the holder learned that it had lost the holding
	Fenced int    // writes of this holder rejected by the shared record
}

// fenceRejection is a write refused by the shared record: an older token
// written after a newer one.
type fenceRejection struct {
	Key     int
	Worker  int
	Token   uint64
	Highest uint64
	At      int64
}

// workerResult is everything a worker process recorded.
type workerResult struct {
	Proc       int
	Intervals  []interval
	Rejections []fenceRejection
	Failures   map[string]uint64 // acquire failures by reason
	Errors     []string          // the first few failure messages
	Counts     lockCounts
	CPU        time.Duration // user + system time of the process
	MaxRSS     int64         // peak resident set, bytes
}

// maxErrorSamples bounds the failure messages a worker keeps.
const maxErrorSamples = 5

// runWorker is a worker process: it reads its hello from in, connects,
// reports ready, waits for the start, runs its goroutines until the end and
// writes its result to out.
func runWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	dec, enc := gob.NewDecoder(in), gob.NewEncoder(out)
	var hello workerHello
	if err := dec.Decode(&hello); err != nil {
		return fmt.Errorf("worker: reading configuration: %w", err)
	}
	res, err := work(ctx, hello, dec, enc)
	if err != nil {
		_ = enc.Encode(workerMsg{Err: err.Error()})
		return err
	}
	return enc.Encode(workerMsg{Result: res})
}

func work(ctx context.Context, hello workerHello, dec *gob.Decoder, enc *gob.Encoder) (*workerResult, error) {
	c := hello.Config
	rec, err := openRecord(c.RecordPath, c.Keys, c.Procs)
	if err != nil {
		return nil, err
	}
	defer rec.close()
	lk, err := newLocker(ctx, c, hello.Proc)
	if err != nil {
		return nil, err
	}
	if err := enc.Encode(workerMsg{Ready: true}); err != nil {
		_ = lk.close(ctx)
		return nil, err
	}
	var start workerStart
	if err := dec.Decode(&start); err != nil {
		_ = lk.close(ctx)
		return nil, fmt.Errorf("worker: waiting for the start: %w", err)
	}
	if d := time.Duration(start.Start - monoNow()); d > 0 {
		time.Sleep(d) // a deadline on the shared clock, not a synchronisation
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Duration(start.End-monoNow()))
	defer cancel()

	res := &workerResult{Proc: hello.Proc, Failures: map[string]uint64{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range c.Goroutines {
		wg.Go(func() {
			w := &contender{cfg: c, rec: rec, lk: lk, id: hello.Proc*c.Goroutines + g, proc: hello.Proc,
				pick: newKeyPicker(c, uint64(hello.Proc*c.Goroutines+g)), end: start.End}
			w.run(runCtx)
			mu.Lock()
			w.mergeInto(res)
			mu.Unlock()
		})
	}
	wg.Wait()
	closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelClose()
	if err := lk.close(closeCtx); err != nil {
		res.Errors = append(res.Errors, "close: "+err.Error())
	}
	res.Counts = lk.stats().snapshot()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err == nil {
		res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		res.MaxRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
	return res, nil
}

// newLocker builds the run's contender library for process proc.
func newLocker(ctx context.Context, c runConfig, proc int) (locker, error) {
	switch c.Lock {
	case lockLeasehold:
		return newLeaseholdLocker(ctx, c, proc)
	case lockRedislock:
		return newRedislockLocker(c), nil
	case lockRedsync:
		return newRedsyncLocker(c), nil
	case lockUnsafe:
		return newUnsafeLocker(c, proc), nil
	case lockPGLock:
		return newPGLockLocker(ctx, c)
	}
	return nil, fmt.Errorf("%w: unknown lock %q", errConfig, c.Lock)
}

// contender is one goroutine competing for names.
type contender struct {
	cfg  runConfig
	rec  *sharedRecord
	lk   locker
	id   int
	proc int
	pick keyPicker
	end  int64

	intervals  []interval
	rejections []fenceRejection
	failures   map[string]uint64
	errs       []string
}

// errorBackoff keeps a contender from spinning on a failing store.
const errorBackoff = 10 * time.Millisecond

func (w *contender) run(ctx context.Context) {
	w.failures = map[string]uint64{}
	for ctx.Err() == nil && monoNow() < w.end {
		key := w.pick()
		call := monoNow()
		if key == hotKey {
			w.rec.waitingNow(w.proc, 1)
		}
		h, err := w.lk.acquire(ctx, keyName(w.cfg.Prefix, key))
		if key == hotKey {
			w.rec.waitingNow(w.proc, -1)
		}
		if err != nil {
			if runEnded(ctx) {
				return // the run ended while waiting: not a failure
			}
			w.fail(err)
			if !errors.Is(err, errNotAcquired) {
				select {
				case <-ctx.Done():
				case <-time.After(errorBackoff):
				}
			}
			continue
		}
		w.hold(ctx, key, call, h)
		if w.cfg.Think > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(w.cfg.Think):
			}
		}
	}
}

// runEnded reports whether the run's context has ended, also in the moment
// after its deadline and before its Err says so: a store call that ends at
// the deadline (as leasehold's do) may return first.
func runEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// hold is the critical section: write the token, "work" for the hold time
// (or until the lock says the holding is lost), check the lock still says
// held, write the token again, release. The interval ends at the last write
// the holder made believing it held.
func (w *contender) hold(ctx context.Context, key int, call int64, h holding) {
	iv := interval{Key: key, Worker: w.id, Token: h.token(), Call: call, Start: monoNow()}
	w.rec.addProgress(w.proc)
	w.rec.holdingNow(w.proc, 1)
	defer w.rec.holdingNow(w.proc, -1)
	w.fence(&iv)
	iv.End = monoNow()
	if w.cfg.Hold > 0 {
		t := time.NewTimer(w.cfg.Hold)
		select {
		case <-t.C:
		case <-h.lost():
		}
		t.Stop()
	}
	// The time is taken before the question: an answer "held" is a belief
	// at that moment (a pause between the two must not stretch it).
	if now := monoNow(); h.held() {
		iv.End = now
		w.fence(&iv)
	} else {
		iv.Lost = true
	}
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.TTL+5*time.Second)
	notHeld, err := h.release(relCtx)
	cancel()
	switch {
	case err != nil:
		w.fail(fmt.Errorf("release: %w", err))
	case notHeld:
		iv.Lost = true
		w.failures["lost:release found it not held"]++
	}
	w.intervals = append(w.intervals, iv)
}

// fence writes the holder's token to the shared record. Under a limit
// above 1 it writes nothing: several holders write at once, and the
// record's newest token would refuse the older ones (the checker checks
// the tokens' order from the intervals instead: tokenOrder).
func (w *contender) fence(iv *interval) {
	if iv.Token == 0 || w.cfg.limit() > 1 {
		return
	}
	if ok, highest := w.rec.fence(iv.Key, iv.Token); !ok {
		iv.Fenced++
		w.rejections = append(w.rejections, fenceRejection{Key: iv.Key, Worker: w.id, Token: iv.Token, Highest: highest, At: monoNow()})
	}
}

func (w *contender) fail(err error) {
	reason := "error"
	if errors.Is(err, errNotAcquired) {
		reason = "not acquired (wait ran out)"
	} else if len(w.errs) < maxErrorSamples {
		w.errs = append(w.errs, err.Error())
	}
	w.failures[reason]++
}

func (w *contender) mergeInto(res *workerResult) {
	res.Intervals = append(res.Intervals, w.intervals...)
	res.Rejections = append(res.Rejections, w.rejections...)
	for k, v := range w.failures {
		res.Failures[k] += v
	}
	for _, e := range w.errs {
		if len(res.Errors) < maxErrorSamples {
			res.Errors = append(res.Errors, e)
		}
	}
}
