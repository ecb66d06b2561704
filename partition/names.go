package partition

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend"
)

// The lease names of a group: its members' and its items'.
const (
	membersDir = "/members/"
	itemsDir   = "/items/"
)

func memberLease(group, owner string) string { return group + membersDir + owner }
func itemLease(group, item string) string    { return group + itemsDir + item }

// metaVersion marks the metadata this package writes, so that a lease of
// another kind under the group's prefix is never taken for a member or an item.
const metaVersion = 1

// memberMeta is a membership lease's metadata: the group it belongs to and
// the digest of its item set, which members compare before they trust each
// other's shares.
type memberMeta struct {
	Partition int    `json:"partition"`
	Group     string `json:"group"`
	Items     int    `json:"items"`
	Digest    string `json:"digest"`
}

// itemMeta is an item lease's metadata. The member reads an item from it
// rather than from the lease's name, which a Manager's key normalizer may
// have changed.
type itemMeta struct {
	Partition int    `json:"partition"`
	Group     string `json:"group"`
	Item      string `json:"item"`
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and ints always encode
	}
	return string(b)
}

// parseMember returns the metadata of a membership lease of group.
func parseMember(group, s string) (memberMeta, bool) {
	var mm memberMeta
	if json.Unmarshal([]byte(s), &mm) != nil || mm.Partition != metaVersion || mm.Group != group {
		return memberMeta{}, false
	}
	return mm, true
}

// parseItem returns the item of an item lease of group.
func parseItem(group, s string) (string, bool) {
	var im itemMeta
	if json.Unmarshal([]byte(s), &im) != nil || im.Partition != metaVersion || im.Group != group {
		return "", false
	}
	return im.Item, true
}

// digest names a sorted item set: equal sets, equal digests.
func digest(sorted []string) string {
	h := sha256.New()
	for _, it := range sorted {
		h.Write([]byte(it))
		h.Write([]byte{0}) // items never contain NUL
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// checkInput validates the group and its items and returns the items
// sorted, or an error wrapping leasehold.ErrInvalidName or ErrInvalidOption.
// It applies the Manager's own rules to every lease name the member would
// use; a Manager's key prefix or normalizer can still refuse a key, and that
// is found when the member first acquires it.
func checkInput(group string, items []string, owner string) ([]string, error) {
	if p := backend.TextProblem(group, true); p != "" {
		return nil, fmt.Errorf("%w: partition group %.60q %s", leasehold.ErrInvalidName, group, p)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: partition group %.60q: no items", leasehold.ErrInvalidOption, group)
	}
	if p := backend.TextProblem(memberLease(group, owner), true); p != "" {
		return nil, fmt.Errorf("%w: partition group %.60q: the membership lease %.60q %s", leasehold.ErrInvalidName, group, memberLease(group, owner), p)
	}
	sorted := slices.Clone(items)
	slices.Sort(sorted)
	for i, it := range sorted {
		if p := backend.TextProblem(it, false); p != "" {
			return nil, fmt.Errorf("%w: partition item %.60q %s", leasehold.ErrInvalidName, it, p)
		}
		if i > 0 && it == sorted[i-1] {
			return nil, fmt.Errorf("%w: partition item %.60q is given twice", leasehold.ErrInvalidName, it)
		}
		if p := backend.TextProblem(itemLease(group, it), true); p != "" {
			return nil, fmt.Errorf("%w: partition item %.60q: its lease name %.60q %s", leasehold.ErrInvalidName, it, itemLease(group, it), p)
		}
	}
	return sorted, nil
}
