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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

var tookRE = regexp.MustCompile(`(worker-\d) took (p-\d+) \(fencing token (\d+)\)`)

// The scenario runs to its end, every phase settles, and each partition's
// fencing token grows every time it changes hands.
func TestScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out syncBuffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.b.String())
	}
	text := out.b.String()
	t.Log("\n" + text)
	for _, phase := range []string{"three workers: settled", "four workers: settled", "worker-2 gone", "worker-3 left"} {
		if !strings.Contains(text, phase) {
			t.Errorf("no %q in the output", phase)
		}
	}
	last := map[string]uint64{}
	for _, m := range tookRE.FindAllStringSubmatch(text, -1) {
		tok, _ := strconv.ParseUint(m[3], 10, 64)
		if tok <= last[m[2]] {
			t.Errorf("%s taken by %s with token %d after %d", m[2], m[1], tok, last[m[2]])
		}
		last[m[2]] = tok
	}
	if len(last) != 12 {
		t.Errorf("%d partitions taken; want 12", len(last))
	}
}
