package leasehold_test

import "github.com/leasehold/leasehold/backend"

// plainInfo is b's Info with none of the optional abilities declared, for a
// test's store that overrides some calls of the backend it embeds: the engine
// then calls it on goroutines (not Inline), one call per round trip, and its
// waiters poll, so that every call it makes reaches the overrides.
func plainInfo(b backend.Backend) backend.Info {
	info := b.Info()
	info.Inline, info.Batches, info.Sharded = false, false, false
	info.AnnouncesReleases, info.HandOffNotices = false, false
	return info
}
