package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/leasehold/leasehold/backend"
)

func listCommand() *command {
	c := &command{name: "list", args: "[-prefix P]", summary: "List the live leases whose name starts with P (all by default), in name order."}
	c.flags = func(fs *flag.FlagSet) func(context.Context, *app, *store, *opts) int {
		prefix := fs.String("prefix", "", "list only names starting with `P`")
		return func(ctx context.Context, a *app, s *store, o *opts) int {
			hs, err := listAll(ctx, s.b, o, o.keyPrefix+*prefix)
			if err != nil {
				return a.fail(s, c.name, err)
			}
			// In name order whatever the store's (SCAN's is arbitrary).
			sort.Slice(hs, func(i, j int) bool { return hs[i].Key < hs[j].Key })
			if o.json {
				out := make([]holdingJSON, 0, len(hs))
				for _, h := range hs {
					out = append(out, toJSON(h, o.keyPrefix))
				}
				err = writeJSON(a.stdout, out)
			} else {
				err = holdingTable(a.stdout, hs, o.keyPrefix, a.width())
			}
			if err != nil {
				return a.failf(s, c.name, "%v", err)
			}
			return exitOK
		}
	}
	return c
}

// lister is the part of a backend that list and watch use.
type lister interface {
	List(ctx context.Context, prefix string, fn func(backend.Holder) bool) error
}

// listAll reads every live holding under prefix, bounded by -timeout.
func listAll(ctx context.Context, l lister, o *opts, prefix string) ([]backend.Holder, error) {
	ctx, cancel := callCtx(ctx, o)
	defer cancel()
	var hs []backend.Holder
	err := l.List(ctx, prefix, func(h backend.Holder) bool {
		hs = append(hs, h)
		return true
	})
	return hs, err
}

func inspectCommand() *command {
	c := &command{name: "inspect", args: "NAME", needsName: true,
		summary: "Show who holds NAME: owner, token, time left (as the store measures it), expiry and metadata.\n  A free name prints \"free\" (with -json: {\"held\":false,\"name\":...,\"key\":...}) and exits 0."}
	c.flags = func(fs *flag.FlagSet) func(context.Context, *app, *store, *opts) int {
		return func(ctx context.Context, a *app, s *store, o *opts) int {
			cctx, cancel := callCtx(ctx, o)
			h, held, err := s.b.Inspect(cctx, o.key)
			cancel()
			if err != nil {
				return a.fail(s, c.name, err)
			}
			switch {
			case !held && o.json:
				err = writeJSON(a.stdout, freeJSON{Name: o.name, Key: o.key})
			case !held:
				_, err = fmt.Fprintln(a.stdout, "free")
			case o.json:
				err = writeJSON(a.stdout, toJSON(h, o.keyPrefix))
			default:
				err = holdingDetail(a.stdout, h, o.keyPrefix)
			}
			if err != nil {
				return a.failf(s, c.name, "%v", err)
			}
			return exitOK
		}
	}
	return c
}

func releaseCommand() *command {
	c := &command{name: "release", args: "-force [-yes] [-token T] NAME", needsName: true,
		summary: "End NAME's lease by force. Its holder is fenced: its next renewal is rejected, so it\n" +
			"  loses the lease (ReasonRejected), and its token is never issued again; waiters are\n" +
			"  woken as after a release. Without -yes it shows the holding and asks for \"y\" on stdin,\n" +
			"  then ends exactly that holding. A free name releases nothing and exits 0, with -token\n" +
			"  too; a name held with another token than -token (or than the one shown) releases\n" +
			"  nothing and exits 1. When the store's answer was lost and the holding is gone, it\n" +
			"  says that this command may have ended it, and exits 1."}
	var force *bool
	c.flags = func(fs *flag.FlagSet) func(context.Context, *app, *store, *opts) int {
		force = fs.Bool("force", false, "required: says that you mean to end another process's lease")
		yes := fs.Bool("yes", false, "do not ask for confirmation")
		token := fs.Uint64("token", 0, "release only the holding with this `token` (0: whichever holds NAME)")
		return func(ctx context.Context, a *app, s *store, o *opts) int {
			return release(ctx, a, s, o, *yes, *token)
		}
	}
	c.check = func() error {
		if !*force {
			return usagef("release needs -force: it ends another process's lease")
		}
		return nil
	}
	return c
}

func release(ctx context.Context, a *app, s *store, o *opts, yes bool, token uint64) int {
	const cmd = "release"
	shown := !yes
	if shown {
		cctx, cancel := callCtx(ctx, o)
		h, held, err := holdingFor(cctx, s.b, o.key, token)
		cancel()
		if err != nil {
			return a.fail(s, cmd, err)
		}
		if !held || (token != 0 && h.Token != token) {
			return releasedNothing(a, o, held, h, token, false)
		}
		fmt.Fprintf(a.stderr, "%s is held by %s (token %d, %s left, metadata \"%s\").\nRelease it by force? Its holder will lose it. [y/N] ",
			oneLine(o.name), oneLine(h.Owner), h.Token, timeLeft(h.ExpiresIn), truncate(oneLine(h.Metadata), maxMetaCol))
		answer, answered := readLine(ctx, a.stdin)
		if !strings.HasSuffix(answer, "\n") {
			fmt.Fprintln(a.stderr) // no answer typed: end the question's line
		}
		if !answered {
			fmt.Fprintln(a.stderr, "interrupted: nothing released")
			return exitFailure
		}
		if ans := strings.ToLower(strings.TrimSpace(answer)); ans != "y" && ans != "yes" {
			fmt.Fprintln(a.stderr, "not confirmed: nothing released")
			return exitFailure
		}
		token = h.Token // exactly the holding shown, not a newer one
	}
	cctx, cancel := callCtx(ctx, o)
	h, removed, err := s.b.Revoke(cctx, o.key, token)
	cancel()
	switch {
	case errors.Is(err, backend.ErrRevokeUnconfirmed):
		return a.failf(s, cmd, "%s: the holding is gone, and this command may be what ended it: the store's answer was lost "+
			"(its holder, if so, loses the lease as rejected at its next renewal; inspect the name before releasing it again)\n%v", oneLine(o.name), err)
	case err != nil:
		return a.failf(s, cmd, "%v (the lease may or may not have been released: inspect it)", err)
	case !removed:
		// Nothing was there to end: say what stands instead.
		cctx, cancel := callCtx(ctx, o)
		now, held, err := s.b.Inspect(cctx, o.key)
		cancel()
		if err != nil {
			return a.failf(s, cmd, "%s: nothing released (no holding with token %d), and what holds it now is unknown: %v", oneLine(o.name), token, err)
		}
		return releasedNothing(a, o, held, now, token, shown)
	}
	if o.json {
		err = writeJSON(a.stdout, struct {
			Released bool        `json:"released"`
			Holding  holdingJSON `json:"holding"`
		}{true, toJSON(h, o.keyPrefix)})
	} else {
		_, err = fmt.Fprintf(a.stdout, "released %s: owner %s, token %d (%s were left) is fenced: its next renewal is rejected\n",
			oneLine(o.name), oneLine(h.Owner), h.Token, timeLeft(h.ExpiresIn))
	}
	if err != nil {
		return a.failf(s, cmd, "%v", err)
	}
	return exitOK
}

// holdingFor is the holding release shows before it asks: the one of token
// among the name's holdings (a name acquired WithLimit has several), else
// the one Inspect answers (for token 0, the one that ends first, which
// Revoke with token 0 ends).
func holdingFor(ctx context.Context, b backend.Backend, key string, token uint64) (backend.Holder, bool, error) {
	if token == 0 {
		return b.Inspect(ctx, key)
	}
	hs, err := b.Holders(ctx, key)
	if err != nil || len(hs) == 0 {
		return backend.Holder{}, false, err
	}
	for _, h := range hs {
		if h.Token == token {
			return h, true, nil
		}
	}
	return hs[0], true, nil
}

// releasedNothing reports a release that found nothing to end, given what
// holds the name now (held, h): exit 0 when it is free, 1 when it is held
// with another token than the one asked for or shown (changed says the
// holding was shown before the revoke).
func releasedNothing(a *app, o *opts, held bool, h backend.Holder, token uint64, changed bool) int {
	code := exitOK
	var msg string
	switch {
	case !held && changed:
		msg = fmt.Sprintf("%s is free: the holding shown (token %d) ended before the release reached it: nothing released", oneLine(o.name), token)
	case !held:
		msg = fmt.Sprintf("%s is free: nothing released", oneLine(o.name))
	case changed:
		code = exitFailure
		msg = fmt.Sprintf("%s changed since it was shown: it is held with token %d now, not %d: nothing released", oneLine(o.name), h.Token, token)
	case token == 0:
		code = exitFailure // granted between the store's answer and the look that followed it
		msg = fmt.Sprintf("%s was free when the release reached it and is held with token %d now: nothing released", oneLine(o.name), h.Token)
	default:
		code = exitFailure
		msg = fmt.Sprintf("%s is held with token %d, not %d: nothing released", oneLine(o.name), h.Token, token)
	}
	if o.json {
		writeJSON(a.stdout, struct {
			Released bool `json:"released"`
		}{})
	}
	fmt.Fprintln(a.stderr, msg)
	return code
}

// readLine reads one line of r, or returns answered false when ctx ends
// first (SIGINT at the prompt: the read is left behind, the process exits).
func readLine(ctx context.Context, r io.Reader) (line string, answered bool) {
	got := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(r).ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		return l, true
	case <-ctx.Done():
		return "", false
	}
}
