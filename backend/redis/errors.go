package redis

import (
	"errors"
	"fmt"
)

// ErrNotConfirmed is returned (wrapped) by Acquire and Renew when replica
// confirmation is on and fewer replicas than asked acknowledged the write in
// time. A renewal may have taken effect on the primary, and the engine must
// not count on it; a grant has been given back (unless the error says that
// failed too).
var ErrNotConfirmed = errors.New("redis: write not confirmed by enough replicas")

// ErrNotificationsDisabled is returned by WatchReleases when release
// notifications were turned off with WithReleaseNotifications(false). It wraps
// errors.ErrUnsupported, so callers that know nothing of this package can tell
// "no notifications here" from a fault.
var ErrNotificationsDisabled = fmt.Errorf("redis: release notifications are disabled: %w", errors.ErrUnsupported)

// ErrInvalidOption is returned (wrapped) by New for an option it cannot use.
var ErrInvalidOption = errors.New("redis: invalid option")

// ErrEvictionPolicy is returned (wrapped) by New when a Redis server may evict
// leases: its maxmemory-policy is not noeviction, or it would not say (CONFIG
// disabled or renamed). The message names the server and the policy.
// WithEvictionAllowed skips the check.
var ErrEvictionPolicy = errors.New("redis: the server may evict leases")
