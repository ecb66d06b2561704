package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/backend/etcd/internal/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is an output two goroutines can write; Wrote ticks after each
// write (one pending tick is enough).
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	select {
	case s.ticks() <- struct{}{}:
	default:
	}
	return n, err
}

// Wrote ticks after a write.
func (s *syncBuffer) Wrote() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ticks()
}

// ticks is wrote, made on first use (s.mu held).
func (s *syncBuffer) ticks() chan struct{} {
	if s.wrote == nil {
		s.wrote = make(chan struct{}, 1)
	}
	return s.wrote
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTwoProcessesElectOneThenHandOver runs two campaigns on a test cluster:
// one leads, the other sees it; when the leader stops, the other takes over
// at once.
func TestTwoProcessesElectOneThenHandOver(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cfg := config{endpoints: c.Endpoints(), name: "job", ttl: 5 * time.Second, minTTL: etcdtest.MinTTL, work: 50 * time.Millisecond}
	var outA, outB syncBuffer
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	errs := make(chan error, 2)
	a, b := cfg, cfg
	a.owner, b.owner = "a", "b"
	go func() { errs <- run(ctxA, a, &outA) }()
	waitFor(t, &outA, "a: LEADER")
	go func() { errs <- run(ctxB, b, &outB) }()
	waitFor(t, &outB, "b: a leads")
	stopA()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	waitFor(t, &outB, "b: LEADER")
	stopB()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(outA.String(), "work unit 1") {
		t.Errorf("a led without working:\n%s", outA.String())
	}
}

func waitFor(t *testing.T, out *syncBuffer, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), what) {
		select {
		case <-out.Wrote():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("no %q in:\n%s", what, out.String())
		}
	}
}
