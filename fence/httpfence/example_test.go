package httpfence_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/httpfence"
)

// The HTTP guard of docs/fencing-tokens.md, verbatim between the markers
// (readme_test.go in the root package checks it): a service behind Handler
// and a lease holder calling it through Transport.
func Example() {
	ctx := context.Background()
	m, _ := leasehold.New(memory.New())
	defer m.Close(ctx)
	saveReport := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Printf("saved %s: %s\n", r.PathValue("name"), b)
	}
	// docs/fencing-tokens.md: HTTP server
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /reports/{name}", saveReport)
	// One server process: fence.NewMemory(). Several: a shared store,
	// postgres.FenceStore or redis.FenceStore.
	handler := httpfence.Handler(fence.NewMemory(), mux)
	// end docs
	srv := httptest.NewServer(handler)
	defer srv.Close()
	url := srv.URL

	// docs/fencing-tokens.md: HTTP client
	client := &http.Client{Transport: &httpfence.Transport{}} // Resource: the lease's name
	err := m.Do(ctx, "daily-report", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, url+"/reports/daily", strings.NewReader("42 invoices"))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return httpfence.CheckResponse(resp) // a *leasehold.StaleTokenError on 409 Conflict
	})
	// end docs
	client.CloseIdleConnections()
	fmt.Println("done:", err)
	// Output:
	// saved daily: 42 invoices
	// done: <nil>
}
