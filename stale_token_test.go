package leasehold_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
)

func TestStaleTokenErrorNamesBothTokensAndMatches(t *testing.T) {
	var err error = fmt.Errorf("write: %w", &leasehold.StaleTokenError{Resource: "invoices", Token: 41, Highest: 42})
	if !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("errors.Is(%v, ErrStaleToken) is false", err)
	}
	if errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatal("a StaleTokenError matches ErrNotAcquired")
	}
	var se *leasehold.StaleTokenError
	if !errors.As(err, &se) || se.Highest != 42 {
		t.Fatalf("errors.As: %v", se)
	}
	for _, want := range []string{`"invoices"`, "41", "42"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err.Error(), want)
		}
	}
}
