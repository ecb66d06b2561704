package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/backend"
)

// errReply marks a script reply of the wrong shape: a different script under
// the same SHA, or a proxy mangling replies.
var errReply = errors.New("unexpected reply from script")

// parseAcquire reads {1, token, expires_ms} or
// {0, holder, holder_token, holder_expires_ms, holder_pttl_ms, queued}, or
// that refusal with held_limit after it (scripts/CONTRACT.md).
func parseAcquire(reply any) (backend.Grant, error) {
	a, ok := reply.([]any)
	if !ok || len(a) == 0 {
		return backend.Grant{}, fmt.Errorf("%w: %v", errReply, reply)
	}
	flag, err := asInt(a[0])
	if err != nil {
		return backend.Grant{}, fmt.Errorf("%w: %v", errReply, reply)
	}
	if flag == 1 {
		if len(a) != 3 {
			return backend.Grant{}, fmt.Errorf("%w: %v", errReply, reply)
		}
		token, err1 := asUint(a[1])
		ms, err2 := asInt(a[2])
		if err1 != nil || err2 != nil || token == 0 {
			return backend.Grant{}, fmt.Errorf("%w: bad grant %v", errReply, reply)
		}
		return backend.Grant{Acquired: true, Token: token, ExpiresAt: time.UnixMilli(ms)}, nil
	}
	if len(a) != 6 && len(a) != 7 {
		return backend.Grant{}, fmt.Errorf("%w: %v", errReply, reply)
	}
	var heldLimit int64
	if len(a) == 7 {
		var err error
		if heldLimit, err = asInt(a[6]); err != nil || heldLimit < 1 || heldLimit > backend.MaxLimit {
			return backend.Grant{}, fmt.Errorf("%w: bad refusal %v", errReply, reply)
		}
	}
	holder, ok := a[1].(string)
	token, err1 := asUint(a[2])
	ms, err2 := asInt(a[3])
	pttl, err3 := asInt(a[4])
	queued, err4 := asInt(a[5])
	if !ok || err1 != nil || err2 != nil || err3 != nil || err4 != nil || pttl < 0 || queued < 0 || queued > 1 {
		return backend.Grant{}, fmt.Errorf("%w: bad refusal %v", errReply, reply)
	}
	return backend.Grant{
		Holder:          holder,
		HolderToken:     token,
		HolderExpiresAt: time.UnixMilli(ms),
		HolderExpiresIn: time.Duration(pttl) * time.Millisecond,
		Queued:          queued == 1,
		HeldLimit:       int(heldLimit),
	}, nil
}

// parseRenew reads {1, expires_ms} or {0, holder}.
func parseRenew(reply any) (backend.Grant, string, error) {
	a, ok := reply.([]any)
	if !ok || len(a) != 2 {
		return backend.Grant{}, "", fmt.Errorf("%w: %v", errReply, reply)
	}
	flag, err := asInt(a[0])
	if err != nil {
		return backend.Grant{}, "", fmt.Errorf("%w: %v", errReply, reply)
	}
	if flag != 1 {
		holder, _ := a[1].(string)
		return backend.Grant{}, holder, nil
	}
	ms, err := asInt(a[1])
	if err != nil {
		return backend.Grant{}, "", fmt.Errorf("%w: %v", errReply, reply)
	}
	return backend.Grant{Acquired: true, ExpiresAt: time.UnixMilli(ms)}, "", nil
}

// asInt accepts an integer reply or its decimal text: RESP2 and RESP3 clients
// and Lua's number conversions do not agree on which one arrives.
func asInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("%w: %T is not an integer", errReply, v)
}

func asUint(v any) (uint64, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, fmt.Errorf("%w: negative %d", errReply, x)
		}
		return uint64(x), nil
	case string:
		return strconv.ParseUint(x, 10, 64)
	}
	return 0, fmt.Errorf("%w: %T is not an integer", errReply, v)
}

// parseHandOff reads the message of a hand-off (scripts/CONTRACT.md): the
// name, the owner, the attempt, the token and the poll number, separated by
// NUL bytes, which none of them can contain.
func parseHandOff(msg string) (backend.HandOff, error) {
	f := strings.Split(msg, "\x00")
	if len(f) != 5 {
		return backend.HandOff{}, fmt.Errorf("%w: hand-off message %q", errReply, msg)
	}
	token, err1 := strconv.ParseUint(f[3], 10, 64)
	poll, err2 := strconv.ParseUint(f[4], 10, 64)
	if err1 != nil || err2 != nil || token == 0 {
		return backend.HandOff{}, fmt.Errorf("%w: hand-off message %q", errReply, msg)
	}
	return backend.HandOff{Key: f[0], Owner: f[1], Attempt: f[2], Token: token, Poll: poll}, nil
}
