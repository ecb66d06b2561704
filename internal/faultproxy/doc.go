// Package faultproxy is a TCP proxy for fault tests: it stands between a
// client and a server on loopback and lets a test cut, stall, slow down or
// black-hole the link, or lose the replies of requests the server did act on.
//
// Its faults act per connection and per direction, which is what the
// backends' fault tests need and what general-purpose proxies do not all
// offer:
//
//   - losing only a reply, and counting the replies lost (DropReplies);
//   - cutting the connections open now while new ones go on working
//     (CutAll: the tests' clients do not retry a refused dial, so the
//     listener never stops);
//   - stalling the connections open now while new ones work (StallExisting);
//   - black-holing every connection (Blackhole), and ending the connections
//     that carried the hole when it is lifted (bytes were lost on them);
//   - holding every chunk for a while (SetDelay).
//
// It uses the standard library only and is a package of the root module,
// internal, so that the backends' tests and the bench share it without
// putting a test tool in the module graph of a program that uses a backend.
package faultproxy
