package redistest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy in the test process between a client and a server. The
// test controls it: cut every connection, lose the replies of the requests
// that do get through (an ambiguous outcome for the client), black-hole the
// link, or slow it down.
type Proxy struct {
	ln     net.Listener
	target string

	mu         sync.Mutex
	conns      map[net.Conn]bool // open connections; true when stalled
	dropReply  bool
	blackhole  bool
	delay      time.Duration
	closed     bool
	quit       chan struct{}
	wg         sync.WaitGroup
	repliesCut int
}

// NewProxy starts a proxy to target on a free loopback port; it is closed in
// t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}, quit: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutAll closes every open connection, in both directions. New connections are
// accepted as before.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// DropReplies makes the proxy forward requests to the server but, on the first
// bytes of a reply, close the connection without forwarding them: the server
// acted, the client cannot know.
func (p *Proxy) DropReplies(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropReply = on
}

// RepliesDropped counts the replies DropReplies has swallowed.
func (p *Proxy) RepliesDropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.repliesCut
}

// Blackhole makes the proxy read and discard everything in both directions
// while keeping connections open: a link that silently stopped working.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = on
}

// StallExisting makes every connection open now silently discard whatever
// it carries, in both directions, while new connections work: a link whose
// TCP state died somewhere in between (a NAT, a failed-over load balancer).
func (p *Proxy) StallExisting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.conns[c] = true
	}
}

// SetDelay holds every chunk, in both directions, for d before forwarding it:
// a slow server or link.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines to end. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
		_ = p.ln.Close()
		for c := range p.conns {
			_ = c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns[client] = false
		p.conns[server] = false
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(server, client, false)
		go p.pipe(client, server, true)
	}
}

// pipe copies src to dst until either side fails, then closes both.
func (p *Proxy) pipe(dst, src net.Conn, isReply bool) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop, delay := p.dropReply && isReply, p.delay
			hole := p.blackhole || p.conns[src] || p.conns[dst]
			if drop {
				p.repliesCut++
			}
			p.mu.Unlock()
			if drop {
				return
			}
			if delay > 0 {
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-p.quit:
					t.Stop()
					return
				}
			}
			if !hole {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
