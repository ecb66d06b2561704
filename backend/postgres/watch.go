package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leasehold/leasehold/backend"
)

// WatchReleases calls fn with the lease name of every release of this table,
// by any owner in any process, until ctx ends; then it returns nil. It holds
// one connection taken out of the pool (hijacked: it no longer counts against
// the pool) on which it LISTENs. After 15 s without a notification it pings
// the server, and a ping not answered within 15 s more ends the connection,
// so that a link that died silently (a NAT or load balancer that forgot it)
// is noticed within 30 s. When the connection fails it reconnects by
// itself with capped, jittered backoff; releases made while it was down are
// not replayed (waiters also wake at the holder's expiry). fn runs on the
// watch's goroutine and must not block. Each call is an independent watch:
// the engine keeps one per Manager.
func (b *Backend) WatchReleases(ctx context.Context, fn func(key string)) error {
	b.watch(ctx, "release", b.channel, b.onListen, fn)
	return nil
}

// WatchHandOffs calls fn with every hand-off to the address addr (a
// QueueRequest.Notify) made on this table, by a release or revoke in any
// process, until ctx ends; then it returns nil. Like WatchReleases, it LISTENs
// on a connection of its own, pings it when idle, reconnects by itself after
// failures, and calls ready (when not nil) each time the LISTEN is in place:
// a hand-off sent before that may be lost (the waiter then picks it up by its next poll, or
// it is taken back after its pickup window). fn and ready run on the watch's
// goroutine and must not block. An address that QueueRequest would refuse
// gives an error wrapping backend.ErrInvalidRequest at once.
//
// The channel is handOffChannel's: "leasehold_h_" and 16 hex digits of a hash
// of the table's schema and name and the address. Its payload, sent by the
// statement that hands the name on, is
//
//	1 <token> <poll> <address> <attempt> <owner bytes> <owner> <name>
//
// fields separated by one space: a format version, the new holding's token,
// the entry's latest QueueRequest.Poll (its 64 bits printed as a signed
// bigint), the address, the attempt, the length of the owner in bytes, the
// owner and the lease name (the rest of the payload, as the caller spelled
// it). Names and owners may hold spaces, but no NUL: the length and the
// position make them unambiguous. A payload of another format, or for
// another address (a hash collision), is dropped.
func (b *Backend) WatchHandOffs(ctx context.Context, addr string, fn func(backend.HandOff), ready func()) error {
	if err := checkAddress(addr); err != nil {
		return err
	}
	b.watch(ctx, "hand-off", b.handOffChannel(addr), ready, func(payload string) {
		h, err := parseHandOff(payload)
		switch {
		case err != nil:
			b.log.DebugContext(ctx, "leasehold postgres: hand-off notice dropped", "err", err)
		case h.address == addr:
			fn(h.HandOff)
		}
	})
	return nil
}

// watch LISTENs on channel until ctx ends, reconnecting after failures with
// capped, jittered backoff; it calls ready (when not nil) after each LISTEN
// that succeeded and fn with every payload.
func (b *Backend) watch(ctx context.Context, what, channel string, ready func(), fn func(payload string)) {
	failures := 0
	for {
		listened, err := b.listen(ctx, channel, ready, fn)
		if ctx.Err() != nil {
			return
		}
		if listened {
			failures = 0
		}
		failures++
		wait := b.backoff(failures)
		b.log.WarnContext(ctx, "leasehold postgres: "+what+" watch interrupted; reconnecting",
			"channel", channel, "err", err, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listen runs one LISTEN connection until it fails or ctx ends. listened
// reports whether the LISTEN itself succeeded.
func (b *Backend) listen(ctx context.Context, channel string, ready func(), fn func(payload string)) (listened bool, err error) {
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	conn := pc.Hijack()
	defer func() {
		// The conn may be in any state (cancelled mid-read): closing it with
		// a short deadline never hangs the caller.
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, err
	}
	if ready != nil {
		ready()
	}
	for {
		// A hijacked connection is never health-checked by the pool, and a
		// link that died silently (a NAT or load balancer that forgot it)
		// delivers nothing and reports nothing: after watchIdle of quiet a
		// ping must come back within watchIdle, or the link is given up.
		wctx, cancel := context.WithTimeout(ctx, b.watchIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			fn(n.Payload)
		case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded):
			return true, err
		default:
			if err := b.ping(ctx, conn); err != nil {
				return true, err
			}
		}
	}
}

// ping checks an idle LISTEN connection: its answer must come within
// watchIdle.
func (b *Backend) ping(ctx context.Context, conn *pgx.Conn) error {
	pctx, cancel := context.WithTimeout(ctx, b.watchIdle)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		return fmt.Errorf("idle LISTEN connection did not answer a ping within %v: %w", b.watchIdle, err)
	}
	return nil
}

// checkAddress makes the check of QueueRequest.Notify (which may be "" there:
// no notice), for an address to watch.
func checkAddress(addr string) error {
	if addr == "" || len(addr) > backend.MaxAddressBytes {
		return fmt.Errorf("%w: hand-off address of %d bytes, want 1 to %d", backend.ErrInvalidRequest, len(addr), backend.MaxAddressBytes)
	}
	for i := 0; i < len(addr); i++ {
		if c := addr[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: hand-off address %q is not printable ASCII without spaces", backend.ErrInvalidRequest, addr)
		}
	}
	return nil
}

// handOffNotice is a decoded hand-off payload with the address it was sent to.
type handOffNotice struct {
	backend.HandOff
	address string
}

var errHandOffPayload = errors.New("postgres: malformed hand-off payload")

// parseHandOff decodes a payload in the format WatchHandOffs documents.
func parseHandOff(payload string) (handOffNotice, error) {
	var f [6]string // version, token, poll, address, attempt, owner bytes
	rest := payload
	for i := range f {
		var ok bool
		if f[i], rest, ok = strings.Cut(rest, " "); !ok {
			return handOffNotice{}, fmt.Errorf("%w: %d fields, want 8", errHandOffPayload, i+1)
		}
	}
	if f[0] != "1" {
		return handOffNotice{}, fmt.Errorf("%w: format %q", errHandOffPayload, f[0])
	}
	token, err1 := strconv.ParseInt(f[1], 10, 64)
	poll, err2 := strconv.ParseInt(f[2], 10, 64)
	ownerLen, err3 := strconv.Atoi(f[5])
	if err := errors.Join(err1, err2, err3); err != nil {
		return handOffNotice{}, fmt.Errorf("%w: %w", errHandOffPayload, err)
	}
	if token <= 0 || ownerLen <= 0 || ownerLen+1 >= len(rest) || rest[ownerLen] != ' ' {
		return handOffNotice{}, fmt.Errorf("%w: token %d, owner of %d bytes in %d", errHandOffPayload, token, ownerLen, len(rest))
	}
	return handOffNotice{
		HandOff: backend.HandOff{
			Key:     rest[ownerLen+1:],
			Owner:   rest[:ownerLen],
			Attempt: f[4],
			Token:   uint64(token),
			Poll:    uint64(poll), // the bigint's 64 bits
		},
		address: f[3],
	}, nil
}
