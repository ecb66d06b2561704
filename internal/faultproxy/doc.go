// Package faultproxy is a TCP proxy for fault tests: it stands between a
// client and a server on loopback and lets a test cut, stall, slow down or
// black-hole the link, or lose the replies of requests the server did act on.
//
// It is github.com/Shopify/toxiproxy/v2 used as a library: a toxiproxy proxy
// with its own latency toxic. The faults toxiproxy has no toxic for, or none
// that can be removed safely, are toxics of this package, plugged into the
// same proxy:
//
//   - losing only a reply, and counting the replies lost (DropReplies);
//   - cutting the connections open now while new ones go on working
//     (CutAll: toxiproxy cuts connections only by disabling the proxy, which
//     refuses new connections for a moment, and the tests' clients do not
//     retry a refused dial);
//   - stalling the connections open now while new ones work (StallExisting);
//   - black-holing every connection (Blackhole): toxiproxy's timeout toxic
//     does that, but once removed it leaves the toxic before it blocked for
//     ever on the next chunk a client writes (a goroutine leak).
//
// It is shared by the backends' tests and the bench's chaos runs (hence
// internal at the root of the repository), and it is a module of its own, so
// that toxiproxy is no requirement of the library's module.
package faultproxy
