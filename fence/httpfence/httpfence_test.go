package httpfence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/fencetest"
	"github.com/leasehold/leasehold/fence/httpfence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is a key-value store behind Handler: PUT /{resource} sets the
// resource's value to the body.
type service struct {
	srv  *httptest.Server
	mu   sync.Mutex
	data map[string]string
}

func newService(t *testing.T, store fence.Store) *service {
	s := &service{data: map[string]string{}}
	s.srv = httptest.NewServer(httpfence.Handler(store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource, _, ok := httpfence.TokenFrom(r.Context())
		if !ok || resource != strings.TrimPrefix(r.URL.Path, "/") {
			http.Error(w, "no token in the context", http.StatusInternalServerError)
			return
		}
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.data[resource] = string(b)
		s.mu.Unlock()
	})))
	t.Cleanup(s.srv.Close)
	return s
}

// Write sends the headers by hand, as Transport would for a lease with
// this token (Transport itself is tested below with real leases).
func (s *service) Write(ctx context.Context, resource string, token uint64, value string) error {
	if err := fence.Validate(resource, token); err != nil {
		return err // the headers could not carry it
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.srv.URL+"/"+resource, strings.NewReader(value))
	if err != nil {
		return err
	}
	req.Header.Set(httpfence.TokenHeader, strconv.FormatUint(token, 10))
	req.Header.Set(httpfence.ResourceHeader, resource)
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return httpfence.CheckResponse(resp)
}

func (s *service) Read(ctx context.Context, resource string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[resource], nil
}

func TestHandlerConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Guard { return newService(t, fence.NewMemory()) })
}

// The whole path with real leases: a stale holder's request through
// Transport is refused with 409 and B's value stands.
func TestTransportCarriesTheLeaseToken(t *testing.T) {
	s := newService(t, fence.NewMemory())
	ctx := context.Background()
	b := memory.New()
	m, err := leasehold.New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	client := &http.Client{Transport: &httpfence.Transport{Base: s.srv.Client().Transport}}
	put := func(ctx context.Context, value string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, s.srv.URL+"/job", strings.NewReader(value))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return httpfence.CheckResponse(resp)
	}

	a, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := put(a.Context(), "A"); err != nil {
		t.Fatal(err)
	}
	aCtx := a.Context()
	tokenA := a.Token()
	// A's lease ends (released here; expired under a paused A in real
	// life), and a request under a fresh context of that lease still
	// carries A's token: LeaseFrom answers for a done context too.
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := put(lb.Context(), "B"); err != nil {
		t.Fatal(err)
	}
	err = put(context.WithoutCancel(aCtx), "A late")
	var se *leasehold.StaleTokenError
	if !errors.As(err, &se) || se.Token != tokenA || se.Highest != lb.Token() || se.Resource != "job" {
		t.Fatalf("A's late write: %v", err)
	}
	if v, _ := s.Read(ctx, "job"); v != "B" {
		t.Fatalf("value %q, want B", v)
	}

	// Without a lease nothing is sent.
	if err := put(ctx, "none"); !errors.Is(err, httpfence.ErrNoLease) {
		t.Fatalf("request without a lease: %v, want ErrNoLease", err)
	}
}

func TestHandlerRefusesMissingHeaders(t *testing.T) {
	s := newService(t, fence.NewMemory())
	for _, h := range []map[string]string{
		{},
		{httpfence.TokenHeader: "x", httpfence.ResourceHeader: "r"},
		{httpfence.TokenHeader: "0", httpfence.ResourceHeader: "r"},
		{httpfence.TokenHeader: "3"},
	} {
		req, _ := http.NewRequest(http.MethodPut, s.srv.URL+"/r", strings.NewReader("v"))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := s.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("headers %v: status %d, want 400", h, resp.StatusCode)
		}
	}
	if v, _ := s.Read(context.Background(), "r"); v != "" {
		t.Fatalf("a refused request wrote %q", v)
	}
}

type failingStore struct{}

func (failingStore) Check(context.Context, string, uint64) error { return errors.New("store down") }

func TestHandlerFailsClosedWhenTheStoreFails(t *testing.T) {
	s := newService(t, failingStore{})
	err := s.Write(context.Background(), "r", 1, "v")
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("write with the store down: %v, want a 503", err)
	}
	if v, _ := s.Read(context.Background(), "r"); v != "" {
		t.Fatalf("wrote %q with the store down", v)
	}
}
