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

// LeaseKey returns the Redis key of key's record, the hash that holds its
// lease (scripts/CONTRACT.md), for inspection with redis-cli.
func (b *Backend) LeaseKey(key string) string {
	// One concatenation (Replace returns key itself when it has nothing to
	// escape): this runs on every call.
	return b.cfg.prefix + "{" + tagEscaper.Replace(key) + "}:lease"
}

// TokenKey returns the Redis key of key's fencing counter in the layout of
// earlier versions; the first grant of the name reads it into the record
// and deletes it.
func (b *Backend) TokenKey(key string) string {
	return b.cfg.prefix + "{" + tagEscaper.Replace(key) + "}:token"
}

// QueueKeys returns the Redis keys of key's waiter queue: the list of the
// queued attempts, head first, and the hash of their entries
// (scripts/CONTRACT.md), for inspection with redis-cli.
func (b *Backend) QueueKeys(key string) (queue, entries string) {
	k := b.keysOf(key)
	return k[2], k[3]
}

// keysOf returns the keys of one name that the acquire, release and revoke
// scripts take: LeaseKey(key), TokenKey(key) and QueueKeys(key). They are
// cut from one string, escaping key once: this runs on every call.
func (b *Backend) keysOf(key string) []string {
	p, e := b.cfg.prefix, tagEscaper.Replace(key)
	all := p + "{" + e + "}:lease" + p + "{" + e + "}:token" + p + "{" + e + "}:queue" + p + "{" + e + "}:entries"
	n := len(p) + len(e) + 3 // "P{E}:"
	return []string{
		all[:n+5],
		all[n+5 : 2*n+10],
		all[2*n+10 : 3*n+15],
		all[3*n+15:],
	}
}

// Channel returns the pub/sub channel on which releases are announced.
func (b *Backend) Channel() string {
	return b.cfg.prefix + "releases"
}

// HandOffChannel returns the pub/sub channel on which the hand-offs to the
// address addr are sent (backend.QueueRequest.Notify): the prefix, "handoff:"
// and addr.
func (b *Backend) HandOffChannel(addr string) string {
	return b.handOffPrefix() + addr
}

func (b *Backend) handOffPrefix() string {
	return b.cfg.prefix + "handoff:"
}

// clusterSlots is the number of hash slots of every Redis Cluster.
const clusterSlots = 16384

// keySlot returns the Cluster slot of key as Redis computes it: the CRC16
// (XMODEM) of its hash tag, the text between its first "{" and the next "}"
// when that is not empty, else of the whole key, modulo 16384. RenewBatch
// groups renewals by it: the keys of one script call must share a slot.
func keySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return int(crc) % clusterSlots
}

// crc16Table is the table of CRC16-XMODEM (polynomial 0x1021), the CRC of
// Redis Cluster's key slots.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
