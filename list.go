package leasehold

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/leasehold/leasehold/backend"
)

// List returns every lease live now whose name starts with prefix, whoever
// holds it, sorted by name ("" lists every name this Manager could hold). Like
// Inspect it decides and changes nothing: it reads the store (the backend's
// List: SCAN on Redis, an index range on SQL) and, like any read of a store
// that others write, may miss a lease granted meanwhile or show one that ended
// meanwhile.
//
// The prefix becomes a key prefix as a name becomes a key: WithKeyPrefix is
// prepended (and taken off the names listed), a WithKeyNormalizer is applied
// to it. A normalizer cannot be undone, so under one the names listed are the
// store's keys, and it must map a prefix of a name to a prefix of its key
// (case folding and adding a namespace do; hashing does not) for List to find
// them. A prefix that is not UTF-8, contains NUL, or makes a key prefix longer
// than any key may be gets ErrInvalidName before any backend call.
func (m *Manager) List(ctx context.Context, prefix string) ([]LeaseInfo, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	keyPrefix, err := m.keyPrefixOf(prefix)
	if err != nil {
		return nil, err
	}
	var out []LeaseInfo
	err = m.b.List(ctx, keyPrefix, func(h backend.Holder) bool {
		name := h.Key
		if m.normalizer == nil {
			name = strings.TrimPrefix(h.Key, m.prefix)
		}
		out = append(out, LeaseInfo{Name: name, Owner: h.Owner, Token: h.Token, ExpiresAt: h.ExpiresAt, Metadata: h.Metadata, Limit: max(h.Limit, 1)})
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("leasehold: list %q: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b LeaseInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// keyPrefixOf is keyOf for a prefix: the same rules, except that a prefix may
// be empty or blank (a name may start with a space).
func (m *Manager) keyPrefixOf(prefix string) (string, error) {
	if p := prefixProblem(prefix); p != "" {
		return "", fmt.Errorf("%w: prefix %.60q %s", ErrInvalidName, prefix, p)
	}
	key := m.prefix + prefix
	if m.normalizer != nil {
		k, err := m.normalizer(prefix)
		if err != nil {
			return "", fmt.Errorf("%w: prefix %.60q: key normalizer: %w", ErrInvalidName, prefix, err)
		}
		key = k
	}
	if p := prefixProblem(key); p != "" {
		return "", fmt.Errorf("%w: the key prefix %.60q of %.60q %s", ErrInvalidName, key, prefix, p)
	}
	if utf8.RuneCountInString(key) > backend.MaxKeyRunes {
		return "", fmt.Errorf("%w: the key prefix %.60q of %.60q is longer than %d runes: no key starts with it", ErrInvalidName, key, prefix, backend.MaxKeyRunes)
	}
	return key, nil
}

func prefixProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}
