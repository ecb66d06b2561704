package backend

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits every backend accepts. The engine checks them before any backend call;
// backends check them again so that direct callers get the same answer.
const (
	// MaxKeyRunes is the longest key or owner, in Unicode code points. Stores
	// that count UTF-16 units need room for twice as many.
	MaxKeyRunes = 200
	// MaxMetadataBytes is the longest metadata, in UTF-8 bytes (so it fits
	// 4000 UTF-16 units, e.g. NVARCHAR(4000)).
	MaxMetadataBytes = 4000
	// MinTTL and MaxTTL bound every TTL.
	MinTTL = time.Millisecond
	MaxTTL = 365 * 24 * time.Hour
	// MaxAttemptBytes is the longest attempt identity: printable ASCII, so
	// that every store keeps it in a short fixed-size column.
	MaxAttemptBytes = 64
)

// CheckAttempt reports why s is not a valid attempt identity: empty, longer
// than MaxAttemptBytes, or not printable ASCII without spaces.
func CheckAttempt(s string) error {
	if s == "" {
		return fmt.Errorf("%w: attempt is empty (every request names its holding)", ErrInvalidRequest)
	}
	if len(s) > MaxAttemptBytes {
		return fmt.Errorf("%w: attempt is %d bytes, more than %d", ErrInvalidRequest, len(s), MaxAttemptBytes)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return fmt.Errorf("%w: attempt %q is not printable ASCII without spaces", ErrInvalidRequest, s)
		}
	}
	return nil
}

// CheckText reports why s is not a valid key or owner: empty or blank, a NUL
// byte, invalid UTF-8, or longer than MaxKeyRunes.
func CheckText(what, s string) error {
	if p := TextProblem(s, true); p != "" {
		return fmt.Errorf("%w: %s %s", ErrInvalidRequest, what, p)
	}
	return nil
}

// TextProblem says what makes s unusable as a key or owner, as a phrase
// ("is empty or blank"), or "" when nothing does. It is CheckText's rule and
// wording, shared with package leasehold, which rejects a lease name with
// its own ErrInvalidName in the same words. withLength false leaves out the
// MaxKeyRunes limit: a lease name may be longer when a key normalizer
// shortens it.
func TextProblem(s string, withLength bool) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "is empty or blank"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	case withLength && utf8.RuneCountInString(s) > MaxKeyRunes:
		return fmt.Sprintf("is longer than %d runes", MaxKeyRunes)
	}
	return ""
}

// CheckTTL reports why ttl is outside [MinTTL, MaxTTL].
func CheckTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("%w: TTL %v is outside [%v, %v]", ErrInvalidRequest, ttl, MinTTL, MaxTTL)
	}
	return nil
}

// CheckTTL reports why the store i describes cannot keep ttl: outside
// [MinTTL, MaxTTL], not a whole number of its TTL unit, or below its own
// minimum.
func (i Info) CheckTTL(ttl time.Duration) error {
	if err := CheckTTL(ttl); err != nil {
		return err
	}
	if u := i.TTLUnit; u > 0 && ttl%u != 0 {
		return fmt.Errorf("%w: TTL %v is not a whole number of %s (%s leases count whole %s)", ErrInvalidRequest, ttl, unitName(u), i.Name, unitName(u))
	}
	if ttl < i.MinTTL {
		return fmt.Errorf("%w: TTL %v is below this %s backend's minimum %v", ErrInvalidRequest, ttl, i.Name, i.MinTTL)
	}
	return nil
}

// unitName names a TTL unit in the plural: "seconds", "milliseconds", or
// "units of 2s".
func unitName(u time.Duration) string {
	switch u {
	case time.Second:
		return "seconds"
	case time.Millisecond:
		return "milliseconds"
	}
	return "units of " + u.String()
}

// CheckMetadata reports why m cannot be stored: invalid UTF-8, a NUL byte (which
// PostgreSQL text cannot hold) or longer than MaxMetadataBytes.
func CheckMetadata(m string) error {
	switch {
	case !utf8.ValidString(m):
		return fmt.Errorf("%w: metadata is not valid UTF-8", ErrInvalidRequest)
	case strings.IndexByte(m, 0) >= 0:
		return fmt.Errorf("%w: metadata contains a NUL byte", ErrInvalidRequest)
	case len(m) > MaxMetadataBytes:
		return fmt.Errorf("%w: metadata is %d bytes, more than %d", ErrInvalidRequest, len(m), MaxMetadataBytes)
	}
	return nil
}

// Validate checks an acquire request against the limits above.
func (r AcquireRequest) Validate() error {
	if err := CheckText("key", r.Key); err != nil {
		return err
	}
	if err := CheckText("owner", r.Owner); err != nil {
		return err
	}
	if err := CheckAttempt(r.Attempt); err != nil {
		return err
	}
	if err := CheckTTL(r.TTL); err != nil {
		return err
	}
	if err := CheckMetadata(r.Metadata); err != nil {
		return err
	}
	if err := CheckLimit(r.Limit); err != nil {
		return err
	}
	return r.Queue.validate(r.Wait)
}

// Validate checks a renew request against the limits above.
func (r RenewRequest) Validate() error {
	if err := CheckText("key", r.Key); err != nil {
		return err
	}
	if err := CheckText("owner", r.Owner); err != nil {
		return err
	}
	if err := CheckAttempt(r.Attempt); err != nil {
		return err
	}
	if r.Token == 0 {
		return fmt.Errorf("%w: token 0 cannot be renewed", ErrInvalidRequest)
	}
	return CheckTTL(r.TTL)
}

// Validate checks a release request against the limits above.
func (r ReleaseRequest) Validate() error {
	if err := CheckText("key", r.Key); err != nil {
		return err
	}
	if err := CheckText("owner", r.Owner); err != nil {
		return err
	}
	return CheckAttempt(r.Attempt)
}
