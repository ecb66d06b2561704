package faultproxy

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// cutWait bounds how long CutAll waits for the connections it cut to finish
// (they do within microseconds; the bound only keeps a test from hanging).
const cutWait = 5 * time.Second

// chunk is the most a link reads at once before forwarding it.
const chunk = 32 << 10

// Proxy is a TCP proxy on a free loopback port, forwarding to one target.
// Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every link's pipes

	mu        sync.Mutex // guards the fields below
	links     map[*link]struct{}
	drop      bool
	dropped   int
	blackhole bool
	delay     time.Duration
	closed    bool
}

// link is one client connection and its connection to the target.
type link struct {
	client, server net.Conn
	once           sync.Once
	closing        chan struct{} // closed by close
	done           chan struct{} // closed once both pipes have returned

	// Guarded by the Proxy's mu.
	stalled bool // StallExisting hit it: it discards what it carries
	holed   bool // it was open during a Blackhole: ended when it is lifted
}

// close ends both connections; it is idempotent.
func (l *link) close() {
	l.once.Do(func() {
		close(l.closing)
		l.client.Close()
		l.server.Close()
	})
}

// New starts a proxy to target (host:port) on 127.0.0.1.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening for %s: %w", target, err)
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is where clients connect (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close() // the server is down: so is the link
			continue
		}
		l := &link{client: c, server: s, closing: make(chan struct{}), done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		l.holed = p.blackhole
		p.links[l] = struct{}{}
		p.mu.Unlock()

		var pipes sync.WaitGroup
		pipes.Go(func() { p.pipe(l, c, s, false) })
		pipes.Go(func() { p.pipe(l, s, c, true) })
		p.wg.Go(func() {
			pipes.Wait()
			p.mu.Lock()
			delete(p.links, l)
			p.mu.Unlock()
			close(l.done)
		})
	}
}

// pipe forwards what src carries to dst, applying the faults in force to
// each chunk, until either connection ends; then it ends the link.
func (p *Proxy) pipe(l *link, src, dst net.Conn, reply bool) {
	defer l.close()
	buf := make([]byte, chunk)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.forward(l, dst, buf[:n], reply) {
			return
		}
		if err != nil {
			return
		}
	}
}

// forward applies the faults in force to one chunk and writes what is left
// of it to dst; false ends the link.
func (p *Proxy) forward(l *link, dst net.Conn, b []byte, reply bool) bool {
	p.mu.Lock()
	swallow := l.stalled || p.blackhole
	if p.blackhole {
		l.holed = true
	}
	drop := reply && p.drop && !swallow
	if drop {
		p.dropped++
	}
	delay := p.delay
	p.mu.Unlock()
	switch {
	case swallow:
		return true
	case drop:
		return false // the server acted; the client never learns
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-l.closing:
			t.Stop()
			return false
		}
	}
	_, err := dst.Write(b)
	return err == nil
}

// CutAll closes every connection open now, both ends, and returns how many
// client connections it cut once they are closed. New connections are
// accepted and carried as before, during the cut too.
func (p *Proxy) CutAll() int {
	hit := p.open()
	for _, l := range hit {
		l.close()
	}
	deadline := time.NewTimer(cutWait)
	defer deadline.Stop()
	for _, l := range hit {
		select {
		case <-l.done:
		case <-deadline.C:
			return len(hit)
		}
	}
	return len(hit)
}

// open returns the links open now.
func (p *Proxy) open() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

// StallExisting makes every connection open now silently discard whatever it
// carries, in both directions, and stay open, while new connections work: a
// link whose TCP state died somewhere in between (a NAT, a failed-over load
// balancer).
func (p *Proxy) StallExisting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		l.stalled = true
	}
}

// DropReplies makes the proxy forward requests to the server but, on the
// first bytes of a reply, close the connection without forwarding them: the
// server acted, the client cannot know. It applies to every connection, new
// ones included, until DropReplies(false).
func (p *Proxy) DropReplies(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = on
}

// RepliesDropped counts the replies DropReplies has swallowed.
func (p *Proxy) RepliesDropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Blackhole makes the proxy read and discard everything in both directions,
// on every connection, new ones included, while keeping them open: a link
// that silently stopped working. Blackhole(false) lets new connections work
// again and ends the ones that carried the hole (bytes were lost on them, so
// they are out of step anyway).
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	if p.closed || on == p.blackhole {
		p.mu.Unlock()
		return
	}
	p.blackhole = on
	var ended []*link
	for l := range p.links {
		if on {
			l.holed = true
		} else if l.holed {
			ended = append(ended, l)
		}
	}
	p.mu.Unlock()
	for _, l := range ended {
		l.close()
	}
}

// SetDelay holds every chunk, in both directions, for d before forwarding it:
// a slow server or link. SetDelay(0) ends it.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Close stops accepting, closes every connection and waits for the
// goroutines that carried them. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if !already {
		p.ln.Close()
	}
	for _, l := range p.open() {
		l.close()
	}
	p.wg.Wait()
}
