package redis

import (
	_ "embed"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
)

// The scripts are the whole server side of the backend: one atomic step per
// operation, each described in scripts/CONTRACT.md. A single call goes by SHA
// with Script.Run, which falls back to EVAL (which also caches the script)
// when the server does not know it yet, e.g. after a restart; a pipeline
// (batches, confirmed calls) loads what the server did not know and sends
// the calls it refused again (pipeline.go).
var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/renew_many.lua
	renewManySrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/inspect.lua
	inspectSrc string
	//go:embed scripts/revoke.lua
	revokeSrc string
	//go:embed scripts/queue.lua
	queueSrc string
	//go:embed scripts/enqueue.lua
	enqueueSrc string
	//go:embed scripts/shared.lua
	sharedSrc string
	//go:embed scripts/acquire_shared.lua
	acquireSharedSrc string
	//go:embed scripts/forget.lua
	forgetSrc string

	acquireScript = goredis.NewScript(withQueue(acquireSrc))
	// acquireSharedScript is Acquire's for a limit above 1.
	acquireSharedScript = goredis.NewScript(withQueue(acquireSharedSrc))
	renewScript         = goredis.NewScript(renewSrc)
	releaseScript       = goredis.NewScript(withQueue(releaseSrc))
	inspectScript       = goredis.NewScript(inspectSrc)
	revokeScript        = goredis.NewScript(withQueue(revokeSrc))
	// renewManyScript is RenewBatch's: renew.lua for many holdings in one
	// call.
	renewManyScript = goredis.NewScript(renewManySrc)
)

// withQueue puts the shared code where src says so: queue.lua where it says
// --[[queue.lua]], enqueue.lua (the acquire scripts' queueing) where it says
// --[[enqueue.lua]], shared.lua (the paths of a shared record, a name held
// under a limit above 1) where it says --[[shared.lua]], and the queue's
// bound where it says {{MaxQueueEntries}}, and forget.lua (how a name left
// free is forgotten) where release and revoke say --[[forget.lua]]: Lua scripts cannot include each
// other, and one text of each keeps the scripts in step. Each include sits
// inside the block of the paths that need it, so that the others create
// none of its functions. A script without queue.lua is a bug: it panics at
// init.
func withQueue(src string) string {
	const include = "\t--[[queue.lua]]\n"
	if !strings.Contains(src, include) {
		panic("redis: a queue script does not include queue.lua")
	}
	src = strings.ReplaceAll(src, include, queueSrc)
	src = strings.ReplaceAll(src, "\t--[[enqueue.lua]]\n", enqueueSrc)
	src = strings.ReplaceAll(src, "\t--[[shared.lua]]\n", sharedSrc)
	src = strings.ReplaceAll(src, "--[[forget.lua]]\n", forgetSrc)
	return strings.ReplaceAll(src, "{{MaxQueueEntries}}", strconv.Itoa(backend.MaxQueueEntries))
}
