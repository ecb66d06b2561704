package redis

import "time"

// withWatchHooks shortens the idle check of the release watch and reports
// each confirmed subscription, so tests await it instead of sleeping.
func withWatchHooks(idle time.Duration, onSubscribed func()) Option {
	return func(c *config) {
		c.watchIdle = idle
		c.onSubscribed = onSubscribed
	}
}
