package backend_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/backend"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidate(t *testing.T) {
	ok := backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Metadata: "m"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid request: %v", err)
	}
	q := backend.QueueRequest{EntryTTL: time.Second, Pickup: 100 * time.Millisecond, Notify: "0123abcd", Poll: 7}
	if err := (backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Wait: true, Queue: q}).Validate(); err != nil {
		t.Fatalf("valid queued request: %v", err)
	}
	bad := map[string]backend.AcquireRequest{
		"blank key":       {Key: " \t", Owner: "o", Attempt: "a.1", TTL: time.Second},
		"NUL key":         {Key: "a\x00", Owner: "o", Attempt: "a.1", TTL: time.Second},
		"invalid UTF-8":   {Key: "\xc3", Owner: "o", Attempt: "a.1", TTL: time.Second},
		"long key":        {Key: strings.Repeat("é", backend.MaxKeyRunes+1), Owner: "o", Attempt: "a.1", TTL: time.Second},
		"empty owner":     {Key: "k", Attempt: "a.1", TTL: time.Second},
		"short TTL":       {Key: "k", Owner: "o", Attempt: "a.1", TTL: backend.MinTTL - 1},
		"long TTL":        {Key: "k", Owner: "o", Attempt: "a.1", TTL: backend.MaxTTL + 1},
		"long metadata":   {Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Metadata: strings.Repeat("m", backend.MaxMetadataBytes+1)},
		"NUL in metadata": {Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Metadata: "\x00"},
		"bad UTF-8 in md": {Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Metadata: "\xff"},
		"no attempt":      {Key: "k", Owner: "o", TTL: time.Second},
		"spaced attempt":  {Key: "k", Owner: "o", Attempt: "a 1", TTL: time.Second},
		"long attempt":    {Key: "k", Owner: "o", Attempt: strings.Repeat("a", backend.MaxAttemptBytes+1), TTL: time.Second},
		"queue, no wait":  {Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Queue: q},
		"queue, no TTL":   {Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Wait: true, Queue: backend.QueueRequest{Pickup: time.Second}},
		"no pickup":       {Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Wait: true, Queue: backend.QueueRequest{EntryTTL: time.Second}},
		"spaced address":  {Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Wait: true, Queue: backend.QueueRequest{EntryTTL: time.Second, Pickup: time.Second, Notify: "a b"}},
		"long address":    {Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second, Wait: true, Queue: backend.QueueRequest{EntryTTL: time.Second, Pickup: time.Second, Notify: strings.Repeat("a", backend.MaxAddressBytes+1)}},
	}
	for name, r := range bad {
		err := r.Validate()
		if !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	if err := (backend.AcquireRequest{Key: strings.Repeat("界", backend.MaxKeyRunes), Owner: "o", Attempt: "a.1", TTL: backend.MaxTTL}).Validate(); err != nil {
		t.Errorf("limits themselves are valid: %v", err)
	}
	if err := (backend.RenewRequest{Key: "k", Owner: "o", Attempt: "a.1", TTL: time.Second}).Validate(); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("renew with token 0: %v", err)
	}
	if err := (backend.RenewRequest{Key: "k", Owner: "o", Token: 1, TTL: time.Second}).Validate(); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("renew without an attempt: %v", err)
	}
	if err := (backend.ReleaseRequest{Key: "k", Owner: "o", Attempt: "a.1"}).Validate(); err != nil {
		t.Errorf("release with token 0 is valid (whatever that attempt holds): %v", err)
	}
	if err := (backend.ReleaseRequest{Key: "k", Owner: "o", Token: 3}).Validate(); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("release without an attempt: %v", err)
	}
}

// TextProblem is CheckText's rule and wording; without the length limit it
// accepts a long name (one a key normalizer may shorten) and nothing else.
func TestTextProblem(t *testing.T) {
	long := strings.Repeat("é", backend.MaxKeyRunes+1)
	for _, s := range []string{"", " \t", "a\x00", "\xc3", long} {
		p := backend.TextProblem(s, true)
		err := backend.CheckText("key", s)
		if p == "" || err == nil || !strings.HasSuffix(err.Error(), "key "+p) {
			t.Errorf("%q: TextProblem %q, CheckText %v: want the same words", s, p, err)
		}
		if got := backend.TextProblem(s, false); (got == "") != (s == long) {
			t.Errorf("%q: TextProblem without length = %q", s, got)
		}
	}
	if p := backend.TextProblem("job", true); p != "" {
		t.Errorf("TextProblem(job) = %q", p)
	}
}
