package redis

import "strings"

// tagEscaper percent-encodes the characters that would end or confuse a hash
// tag, and the escape character itself, so that the encoding is injective:
// distinct keys always give distinct Redis keys.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// hashTag returns "{E}" for key, E being key escaped; the keys of one name all
// carry it, so Redis Cluster stores them in one slot.
func hashTag(key string) string {
	return "{" + tagEscaper.Replace(key) + "}"
}

// LeaseKey returns the Redis key of the hash that holds key's lease (owner,
// attempt, token, meta, and w when a waiter asked for the release to be
// announced), for inspection with redis-cli.
func (b *Backend) LeaseKey(key string) string {
	// One concatenation (Replace returns key itself when it has nothing to
	// escape): this runs on every call.
	return b.cfg.prefix + "{" + tagEscaper.Replace(key) + "}:lease"
}

// TokenKey returns the Redis key of key's fencing counter.
func (b *Backend) TokenKey(key string) string {
	return b.cfg.prefix + "{" + tagEscaper.Replace(key) + "}:token"
}

// keysOf returns LeaseKey(key) and TokenKey(key), escaping key once.
func (b *Backend) keysOf(key string) (lease, token string) {
	e := tagEscaper.Replace(key)
	return b.cfg.prefix + "{" + e + "}:lease", b.cfg.prefix + "{" + e + "}:token"
}

// Channel returns the pub/sub channel on which releases are announced.
func (b *Backend) Channel() string {
	return b.cfg.prefix + "releases"
}
