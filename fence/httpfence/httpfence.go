// Package httpfence carries a lease's fencing token over HTTP: Transport, on
// the client, sends the token of the lease on each request's context in
// the Leasehold-Token and Leasehold-Resource headers, and Handler, on the
// server, refuses a request whose token is lower than the highest its
// resource has seen with 409 Conflict, so that a holder paused past its TTL
// cannot overwrite the work of its successor through the service.
package httpfence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
)

// The headers a fenced request carries.
const (
	TokenHeader    = "Leasehold-Token"
	ResourceHeader = "Leasehold-Resource"
	// HighestHeader is on a 409 Conflict response, with the resource and
	// token headers of the refused request: the highest token recorded.
	HighestHeader = "Leasehold-Highest-Token"
)

// ErrNoLease is returned (wrapped) by Transport for a request whose context
// holds no lease (see leasehold.LeaseFrom): it is not sent, rather than
// sent unfenced.
var ErrNoLease = errors.New("httpfence: no lease in the request's context")

// Transport is an http.RoundTripper that adds the fencing headers to every
// request, from the lease of the request's context: run the request under
// the lease's Context (or inside Do's function).
type Transport struct {
	// Base sends the request; nil: http.DefaultTransport.
	Base http.RoundTripper
	// Resource names the resource the token fences; "": the lease's name.
	Resource string
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	l, ok := leasehold.LeaseFrom(r.Context())
	if !ok {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even on errors
		}
		return nil, fmt.Errorf("%w: %s %s", ErrNoLease, r.Method, r.URL)
	}
	resource := t.Resource
	if resource == "" {
		resource = l.Name()
	}
	r = r.Clone(r.Context())
	r.Header.Set(TokenHeader, strconv.FormatUint(l.Token(), 10))
	r.Header.Set(ResourceHeader, resource)
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

type tokenKey struct{}

type fenced struct {
	resource string
	token    uint64
}

// TokenFrom returns the resource and token of a request that Handler let
// through: a handler writing to a store with a guard of its own (say
// postgres.Fence in the write's transaction) passes them on.
func TokenFrom(ctx context.Context) (resource string, token uint64, ok bool) {
	f, ok := ctx.Value(tokenKey{}).(fenced)
	return f.resource, f.token, ok
}

// Handler refuses, before next sees it, a request without valid fencing
// headers (400 Bad Request) or whose token store refuses (409 Conflict for a
// stale token, 503 Service Unavailable when the store fails). Requests of
// one resource run next one at a time, the check included, so that with a
// store only this process writes to (fence.Memory) a stale request can never
// pass the check while a newer one is being handled. Several server
// processes need a shared store (postgres.FenceStore, redis.FenceStore)
// and, to be exact, the write's own guard: see docs/fencing-tokens.md.
func Handler(store fence.Store, next http.Handler) http.Handler {
	h := &handler{store: store, next: next}
	return h
}

type handler struct {
	store fence.Store
	next  http.Handler

	serial fence.Serial
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resource := r.Header.Get(ResourceHeader)
	token, err := strconv.ParseUint(r.Header.Get(TokenHeader), 10, 64)
	if err != nil {
		http.Error(w, "httpfence: missing or invalid "+TokenHeader+" header", http.StatusBadRequest)
		return
	}
	if err := fence.Validate(resource, token); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	unlock := h.serial.Lock(resource)
	defer unlock()
	switch err := h.store.Check(r.Context(), resource, token); {
	case errors.Is(err, leasehold.ErrStaleToken):
		w.Header().Set(ResourceHeader, resource)
		w.Header().Set(TokenHeader, strconv.FormatUint(token, 10))
		var se *leasehold.StaleTokenError
		if errors.As(err, &se) {
			w.Header().Set(HighestHeader, strconv.FormatUint(se.Highest, 10))
		}
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		http.Error(w, "httpfence: fence store: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	h.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, fenced{resource, token})))
}

// CheckResponse turns a response of Handler into an error: nil for a 2xx;
// for 409 Conflict a *leasehold.StaleTokenError (errors.Is
// leasehold.ErrStaleToken) naming the refused and the highest token; an
// error naming the status otherwise. It reads no body.
func CheckResponse(resp *http.Response) error {
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusConflict:
		token, _ := strconv.ParseUint(resp.Header.Get(TokenHeader), 10, 64)
		highest, _ := strconv.ParseUint(resp.Header.Get(HighestHeader), 10, 64)
		return &leasehold.StaleTokenError{Resource: resp.Header.Get(ResourceHeader), Token: token, Highest: highest}
	default:
		return fmt.Errorf("httpfence: the server answered %s", resp.Status)
	}
}
