package partition

// Rounds is how many rounds the member has begun: a test waits for a few
// more to see that a stable group moves nothing.
func (mem *Member) Rounds() int64 { return mem.rounds.Load() }
