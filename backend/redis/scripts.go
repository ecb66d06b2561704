package redis

import (
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
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
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/inspect.lua
	inspectSrc string
	//go:embed scripts/revoke.lua
	revokeSrc string

	acquireScript = goredis.NewScript(acquireSrc)
	renewScript   = goredis.NewScript(renewSrc)
	releaseScript = goredis.NewScript(releaseSrc)
	inspectScript = goredis.NewScript(inspectSrc)
	revokeScript  = goredis.NewScript(revokeSrc)
)
