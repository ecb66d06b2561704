package faultproxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// cutWait bounds how long CutAll waits for the connections it cut to close
// (they close within microseconds; the bound only keeps a test from hanging
// should toxiproxy ever keep one open).
const cutWait = 5 * time.Second

// Proxy is a TCP proxy on a free loopback port, forwarding to one target.
// Its methods are safe for concurrent use.
type Proxy struct {
	tp *toxiproxy.Proxy

	mu        sync.Mutex // serialises the changes of toxics below
	seq       int        // names the cut and stall toxics
	drop      *dropReplyToxic
	dropped   int64 // replies lost by earlier DropReplies(true)
	blackhole bool
	delay     time.Duration
	closed    bool
}

// New starts a proxy to target (host:port) on 127.0.0.1.
func New(target string) (*Proxy, error) {
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	tp := toxiproxy.NewProxy(server, "faultproxy", "127.0.0.1:0", target)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("faultproxy: listening for %s: %w", target, err)
	}
	return &Proxy{tp: tp}, nil
}

// Addr is where clients connect (host:port).
func (p *Proxy) Addr() string { return p.tp.Listen }

// add adds a toxic described by toxiproxy's JSON form.
func (p *Proxy) add(format string, args ...any) (*toxics.ToxicWrapper, error) {
	w, err := p.tp.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(format, args...)))
	if err != nil {
		return nil, fmt.Errorf("faultproxy: adding a toxic: %w", err)
	}
	return w, nil
}

// mustAdd is add for toxics whose description is this package's own: an
// error is a bug here.
func (p *Proxy) mustAdd(format string, args ...any) *toxics.ToxicWrapper {
	w, err := p.add(format, args...)
	if err != nil {
		panic(err)
	}
	return w
}

func (p *Proxy) remove(name string) {
	_ = p.tp.Toxics.RemoveToxic(context.Background(), name)
}

// CutAll closes every connection open now, both ends, and returns how many
// client connections it cut once they are closed. New connections are
// accepted and carried as before, during the cut too.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	p.seq++
	name := fmt.Sprintf("cut-%d", p.seq)
	// Downstream only: closing a connection's client end ends its upstream
	// link as well, which closes the server end.
	w := p.mustAdd(`{"name":%q,"type":%q,"stream":"downstream"}`, name, toxicCut)
	hit := p.disarm(&w.Toxic.(*cutToxic).existing)
	p.remove(name)
	deadline := time.NewTimer(cutWait)
	defer deadline.Stop()
	for _, s := range hit {
		select {
		case <-s.done:
		case <-deadline.C:
			return len(hit)
		}
	}
	return len(hit)
}

// StallExisting makes every connection open now silently discard whatever it
// carries, in both directions, and stay open, while new connections work: a
// link whose TCP state died somewhere in between (a NAT, a failed-over load
// balancer).
func (p *Proxy) StallExisting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.seq++
	for _, stream := range []string{"upstream", "downstream"} {
		w := p.mustAdd(`{"name":"stall-%d-%s","type":%q,"stream":%q}`, p.seq, stream, toxicStall, stream)
		p.disarm(&w.Toxic.(*stallToxic).existing)
	}
}

// disarm lets the links started from now on through e, under the lock
// toxiproxy holds while it starts a link, and returns the links e hit.
func (p *Proxy) disarm(e *existing) []*linkState {
	p.tp.Toxics.Lock()
	defer p.tp.Toxics.Unlock()
	return e.disarm()
}

// DropReplies makes the proxy forward requests to the server but, on the
// first bytes of a reply, close the connection without forwarding them: the
// server acted, the client cannot know. It applies to every connection, new
// ones included, until DropReplies(false).
func (p *Proxy) DropReplies(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || on == (p.drop != nil) {
		return
	}
	if on {
		w := p.mustAdd(`{"name":"drop-reply","type":%q,"stream":"downstream"}`, toxicDropReply)
		p.drop = w.Toxic.(*dropReplyToxic)
		return
	}
	p.remove("drop-reply")
	p.dropped += p.drop.dropped.Load()
	p.drop = nil
}

// RepliesDropped counts the replies DropReplies has swallowed.
func (p *Proxy) RepliesDropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.dropped
	if p.drop != nil {
		n += p.drop.dropped.Load()
	}
	return int(n)
}

// Blackhole makes the proxy read and discard everything in both directions,
// on every connection, new ones included, while keeping them open: a link
// that silently stopped working. Blackhole(false) lets new connections work
// again and ends the ones that carried the hole (bytes were lost on them, so
// they are out of step anyway).
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || on == p.blackhole {
		return
	}
	p.blackhole = on
	for _, stream := range []string{"upstream", "downstream"} {
		name := "blackhole-" + stream
		if on {
			p.mustAdd(`{"name":%q,"type":%q,"stream":%q}`, name, toxicBlackhole, stream)
		} else {
			p.remove(name)
		}
	}
}

// SetDelay holds every chunk, in both directions, for d before forwarding it
// (toxiproxy's latency toxic, whose unit is the millisecond: d is rounded up
// to one): a slow server or link. SetDelay(0) ends it.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || d == p.delay {
		return
	}
	for _, stream := range []string{"upstream", "downstream"} {
		name := "delay-" + stream
		if p.delay > 0 {
			p.remove(name)
		}
		if d > 0 {
			p.mustAdd(`{"name":%q,"type":"latency","stream":%q,"attributes":{"latency":%d}}`, name, stream, (d + time.Millisecond - 1).Milliseconds())
		}
	}
	p.delay = d
}

// Close stops accepting and closes every connection. It is idempotent. The
// goroutines that carried the connections end as their connections' reads
// fail, shortly after it returns.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.tp.Stop()
	}
}
