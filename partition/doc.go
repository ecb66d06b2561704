// Package partition spreads a fixed set of named work items (partitions,
// shards, tenants) over the processes of a group, on top of a
// leasehold.Manager: each item is a lease, so at most one member owns it at
// any moment, and its fencing token fences off the previous owner's writes.
//
// Join makes this process a member of a group. The member holds a
// membership lease of its own, learns the live members from the store
// (Manager.List under the group's prefix) and aims at its fair share of the
// items: ⌈N/M⌉ or ⌊N/M⌋ by its rank among the M members sorted by owner, so
// that every member computes every share alike without talking to the
// others. It takes free items while below its share and hands items back
// while above it; it never takes an item that another member holds. So a
// stable group moves nothing, a join moves about N/(M+1) items, and a dead
// member's items are taken over once their leases expire.
//
// Handing an item back is graceful: its callback's context is cancelled,
// the member waits for Callbacks.OnAssigned to return (the lease kept
// renewed, for up to the grace), and only then releases the lease, so the
// next owner starts after the old one has stopped. A callback still running
// after the grace has its lease's renewals stopped: the lease ends at its
// local deadline, before the store lets another member in.
//
// Lease names live under the group: "<group>/members/<owner>" for the
// members, "<group>/items/<item>" for the items.
package partition
