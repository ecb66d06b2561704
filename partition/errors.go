package partition

import "errors"

// ErrItemSetMismatch: a live member of the group was given another set of
// items than the one Join was given. Members must agree on the items to
// agree on the shares, so Join refuses (before acquiring anything when it
// can see that member already). To change the items, give the new set a
// new group name, or stop the whole group first.
var ErrItemSetMismatch = errors.New("partition: the item set differs from the group's")
