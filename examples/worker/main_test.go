package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// turnsWriter keeps the example's output and ends the run once it has told
// of enough turns.
type turnsWriter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	turns  int
	enough int
	stop   context.CancelFunc
}

func (w *turnsWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(" leads (token ")) {
		if w.turns++; w.turns == w.enough {
			w.stop()
		}
	}
	return w.b.Write(p)
}

var leadsRE = regexp.MustCompile(`^ *[0-9.]+s (worker-\d) leads \(token (\d+)\)`)

// The workers take turns (both lead), fencing tokens increase from turn to
// turn, and each worker's turn is told to its end (finished or lost) before
// that worker leads again.
func TestWorkersTakeTurns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &turnsWriter{enough: 4, stop: cancel}
	run(ctx, w)
	out := w.b.String()
	t.Log("\n" + out)

	led := map[string]int{}
	open := map[string]bool{} // a turn told without its end yet
	var last uint64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := leadsRE.FindStringSubmatch(line); m != nil {
			tok, _ := strconv.ParseUint(m[2], 10, 64)
			if tok <= last {
				t.Errorf("token %d after %d: %q", tok, last, line)
			}
			if open[m[1]] {
				t.Errorf("%s leads again before its turn ended: %q", m[1], line)
			}
			last, open[m[1]] = tok, true
			led[m[1]]++
			continue
		}
		for name := range open {
			if strings.Contains(line, name+" finished") || strings.Contains(line, name+" lost the lease") {
				open[name] = false
			}
		}
	}
	if led["worker-1"] == 0 || led["worker-2"] == 0 {
		t.Errorf("turns %v: both workers must lead", led)
	}
	if !strings.Contains(out, "worker-2 lost the lease at its local deadline") {
		t.Error("the cut-off worker never lost the lease")
	}
}
