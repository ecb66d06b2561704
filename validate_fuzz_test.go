package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold"
)

// FuzzValidation: a name or option either passes validation or is rejected
// with ErrInvalidName / ErrInvalidOption before any backend call, exactly as
// the rules say. Run with: go test -fuzz FuzzValidation -run '^$' .
func FuzzValidation(f *testing.F) {
	f.Add("job", int64(time.Second), int64(0), int64(0))
	f.Add("", int64(0), int64(0), int64(-1))
	f.Add(" \t", int64(time.Millisecond), int64(time.Millisecond), int64(-2))
	f.Add("a\x00b", int64(leasehold.MaxTTL+1), int64(1), int64(1))
	f.Add("\xff", int64(time.Millisecond-1), int64(-1), int64(0))
	f.Add(strings.Repeat("界", 201), int64(time.Hour), int64(time.Hour), int64(0))
	m, counts := newManager(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, name string, ttl, renew, wait int64) {
		nameOK := strings.TrimSpace(name) != "" && utf8.ValidString(name) &&
			!strings.ContainsRune(name, 0) && utf8.RuneCountInString(name) <= 200
		ttlD, renewD, waitD := time.Duration(ttl), time.Duration(renew), time.Duration(wait)
		if waitD > 0 {
			waitD = 0 // keep the fuzzer fast: a positive wait validates like 0
		}
		margin := min(ttlD/10, time.Second) // the local deadline is TTL - margin; a renewal needs another margin
		optsOK := ttlD >= time.Millisecond && ttlD <= leasehold.MaxTTL &&
			renewD >= 0 && (renewD == 0 || renewD <= ttlD-2*margin) && (waitD == 0 || waitD == leasehold.WaitForever)
		opts := []leasehold.AcquireOption{leasehold.WithTTL(ttlD), leasehold.WithWait(0)}
		if renewD != 0 || renew < 0 {
			opts = append(opts, leasehold.WithRenewEvery(renewD))
		}
		if renewD < 0 {
			optsOK = false
		}
		if waitD != 0 {
			opts = append(opts, leasehold.WithWait(waitD))
			optsOK = optsOK && waitD == leasehold.WaitForever
		}
		before := counts.Acquires.Load() // releases may be cleanups of earlier runs
		l, err := m.Acquire(ctx, name, opts...)
		switch {
		case !optsOK:
			if !errors.Is(err, leasehold.ErrInvalidOption) {
				t.Fatalf("Acquire(%q, ttl=%v renew=%v wait=%v) = %v, want ErrInvalidOption", name, ttlD, renewD, waitD, err)
			}
		case !nameOK:
			if !errors.Is(err, leasehold.ErrInvalidName) {
				t.Fatalf("Acquire(%q) = %v, want ErrInvalidName", name, err)
			}
		default:
			if err != nil && ttlD < 10*time.Millisecond && !errors.Is(err, leasehold.ErrInvalidName) && !errors.Is(err, leasehold.ErrInvalidOption) {
				return // a TTL this short may run out before the grant arrives
			}
			if err != nil {
				t.Fatalf("Acquire(%q, ttl=%v renew=%v wait=%v) = %v, want a lease", name, ttlD, renewD, waitD, err)
			}
			if l.Name() != name {
				t.Fatalf("Name() = %q, want %q", l.Name(), name)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return
		}
		if counts.Acquires.Load() != before {
			t.Fatalf("rejected input reached the backend")
		}
	})
}
