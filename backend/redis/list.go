package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/backend"
)

// listPage is the COUNT hint of each SCAN step and the size of each pipeline
// of inspections: small enough that no step holds the server for long.
const listPage = 500

// tagUnescaper undoes tagEscaper. strings.Replacer never rescans its output,
// so "%257B" becomes "%7B", not "{".
var tagUnescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

// globEscaper makes text match itself in a SCAN MATCH pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// errStopList ends the SCAN of every node once fn has asked to stop.
var errStopList = errors.New("list stopped")

// List implements backend.Backend: SCAN over the records of names that start
// with prefix (on every master of a Cluster; free names keep theirs, and are
// left out), then each page's holdings read with the inspect script in one
// pipeline. It never blocks the server for
// long; like any SCAN it may miss a holding granted meanwhile or report one
// that ended meanwhile. fn is never called concurrently, nor after List has
// returned; it may be called on another goroutine than List's.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error {
	if err := b.closed(); err != nil {
		return err
	}
	head := b.cfg.prefix + "{"
	pattern := globEscaper.Replace(head+tagEscaper.Replace(prefix)) + "*}:lease"
	var (
		mu      sync.Mutex
		stopped bool // fn asked to stop, or List has returned
	)
	deliver := func(hs []backend.Holder) error {
		mu.Lock()
		defer mu.Unlock()
		for _, h := range hs {
			if stopped {
				return errStopList
			}
			stopped = !fn(h)
		}
		if stopped {
			return errStopList
		}
		return nil
	}
	scan := func(ctx context.Context, node goredis.UniversalClient) error {
		iter := node.Scan(ctx, 0, pattern, listPage).Iterator()
		var page []string
		flush := func() error {
			hs, err := b.inspectPage(ctx, page, head)
			page = page[:0]
			if err != nil {
				return err
			}
			return deliver(hs)
		}
		for iter.Next(ctx) {
			if page = append(page, iter.Val()); len(page) == listPage {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(page) > 0 {
			return flush()
		}
		return nil
	}
	var err error
	terr := b.roundTrip(ctx, nil, func(ctx context.Context) {
		switch c := b.client.(type) {
		case *goredis.ClusterClient:
			err = c.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error { return scan(ctx, node) })
		default:
			err = scan(ctx, b.client)
		}
	})
	if terr != nil {
		// The scan may go on a little, until its next page: it must not
		// call fn once List has returned.
		mu.Lock()
		stopped = true
		mu.Unlock()
		return fmt.Errorf("redis: list %q: %w", prefix, terr)
	}
	if err != nil && !errors.Is(err, errStopList) {
		return fmt.Errorf("redis: list %q: %w", prefix, err)
	}
	return nil
}

// inspectPage reads the holdings of a page of records in one pipeline; free
// records, and holdings that ended since SCAN saw them, are left out.
func (b *Backend) inspectPage(ctx context.Context, leaseKeys []string, head string) ([]backend.Holder, error) {
	for attempt := 0; ; attempt++ {
		p := b.client.Pipeline()
		cmds := make([]*goredis.Cmd, len(leaseKeys))
		for i, k := range leaseKeys {
			cmds[i] = inspectScript.EvalSha(ctx, p, []string{k})
		}
		_, _ = p.Exec(ctx)
		var hs []backend.Holder
		noScript := false
		for i, c := range cmds {
			if err := c.Err(); err != nil {
				if goredis.HasErrorPrefix(err, "NOSCRIPT") {
					noScript = true
					continue
				}
				return nil, err
			}
			name := tagUnescaper.Replace(strings.TrimSuffix(strings.TrimPrefix(leaseKeys[i], head), "}:lease"))
			held, err := parseHoldings(name, c.Val())
			if err != nil {
				return nil, err
			}
			hs = append(hs, held...)
		}
		if !noScript {
			return hs, nil
		}
		if attempt > 0 {
			return nil, errors.New("inspect script not found after loading it")
		}
		// A ClusterClient loads it on every master.
		if err := inspectScript.Load(ctx, b.client).Err(); err != nil {
			return nil, err
		}
	}
}
