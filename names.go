package leasehold

import (
	"fmt"

	"github.com/leasehold/leasehold/backend"
)

// keyOf turns a lease name into its backend key, rejecting what no backend
// could store. The rules and their wording are the backends' own
// (backend.TextProblem); only the error matched is ErrInvalidName. Only keys
// have a length limit: a normalizer may shorten a long name.
func (m *Manager) keyOf(name string) (string, error) {
	if p := backend.TextProblem(name, false); p != "" {
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
	if p := backend.TextProblem(key, true); p != "" {
		if key == name {
			return "", fmt.Errorf("%w: %.60q %s", ErrInvalidName, name, p)
		}
		return "", fmt.Errorf("%w: the key %.60q of %.60q %s", ErrInvalidName, key, name, p)
	}
	return key, nil
}
