package leasehold

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/leasehold/leasehold/backend"
)

// nameProblem says what makes a lease name, or the key it normalizes to,
// unusable ("" when nothing does). Only keys have a length limit: a normalizer
// may shorten a long name.
func nameProblem(s string, key bool) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "is empty or blank"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	case key && utf8.RuneCountInString(s) > backend.MaxKeyRunes:
		return fmt.Sprintf("is longer than %d runes", backend.MaxKeyRunes)
	}
	return ""
}

// keyOf turns a lease name into its backend key, rejecting what no backend
// could store.
func (m *Manager) keyOf(name string) (string, error) {
	if p := nameProblem(name, false); p != "" {
		return "", fmt.Errorf("%w: %.60q %s", ErrInvalidName, name, p)
	}
	key := m.prefix + name
	if m.normalizer != nil {
		k, err := m.normalizer(name)
		if err != nil {
			return "", fmt.Errorf("%w: %.60q: key normalizer: %w", ErrInvalidName, name, err)
		}
		key = k
	}
	if p := nameProblem(key, true); p != "" {
		if key == name {
			return "", fmt.Errorf("%w: %.60q %s", ErrInvalidName, name, p)
		}
		return "", fmt.Errorf("%w: the key %.60q of %.60q %s", ErrInvalidName, key, name, p)
	}
	return key, nil
}
