package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Store records the highest fencing token per resource. Check records token
// for resource when it is not lower than the highest recorded, and refuses
// it otherwise with a *leasehold.StaleTokenError (errors.Is
// leasehold.ErrStaleToken). An equal token passes: it is the same holder
// writing again.
type Store interface {
	Check(ctx context.Context, resource string, token uint64) error
}

// ErrInvalidFence is returned (wrapped) for a resource name or token that no
// guard accepts; nothing is recorded then.
var ErrInvalidFence = errors.New("fence: invalid resource or token")

// MaxResourceBytes is the longest resource name a guard accepts.
const MaxResourceBytes = 512

// Validate reports whether a guard can record token for resource: the
// resource neither empty, invalid UTF-8, holding a NUL byte nor longer than
// MaxResourceBytes; the token not 0 (no grant carries 0). Errors wrap
// ErrInvalidFence.
func Validate(resource string, token uint64) error {
	switch {
	case strings.TrimSpace(resource) == "":
		return fmt.Errorf("%w: resource name is empty", ErrInvalidFence)
	case !utf8.ValidString(resource):
		return fmt.Errorf("%w: resource name is not valid UTF-8", ErrInvalidFence)
	case strings.IndexByte(resource, 0) >= 0:
		return fmt.Errorf("%w: resource name contains a NUL byte", ErrInvalidFence)
	case len(resource) > MaxResourceBytes:
		return fmt.Errorf("%w: resource name is %d bytes, more than %d", ErrInvalidFence, len(resource), MaxResourceBytes)
	case token == 0:
		return fmt.Errorf("%w: token 0 (no lease carries it)", ErrInvalidFence)
	}
	return nil
}
