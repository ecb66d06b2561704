package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes what each connection sends and reports every chunk it
// received on got.
type echoServer struct {
	ln  net.Listener
	got chan string
	wg  sync.WaitGroup
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, got: make(chan string, 64)}
	var conns []net.Conn
	var mu sync.Mutex
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						s.got <- string(buf[:n])
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends msg and reads as many bytes back, within d.
func roundTrip(c net.Conn, msg string, d time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func mustEcho(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if got, err := roundTrip(c, msg, 5*time.Second); err != nil || got != msg {
		t.Fatalf("echo of %q: %q, %v", msg, got, err)
	}
}

// mustBeSilent asserts that nothing comes back within d and the connection
// stays open (a timeout, not an end).
func mustBeSilent(t *testing.T, c net.Conn, msg string, d time.Duration) {
	t.Helper()
	_, err := roundTrip(c, msg, d)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a silent link: %v, want a read timeout", err)
	}
}

// mustBeCut asserts that the connection was closed by the proxy.
func mustBeCut(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from a cut connection: %v, want its end", err)
	}
}

func TestCutAllCutsOpenConnectionsOnly(t *testing.T) {
	s := startEcho(t)
	p := newProxy(t, s.ln.Addr().String())
	a, b := dial(t, p), dial(t, p)
	mustEcho(t, a, "a")
	mustEcho(t, b, "b")
	if n := p.CutAll(); n != 2 {
		t.Errorf("CutAll cut %d connections, want 2", n)
	}
	mustBeCut(t, a)
	mustBeCut(t, b)
	c := dial(t, p)
	mustEcho(t, c, "after the cut")
	if n := p.CutAll(); n != 1 {
		t.Errorf("second CutAll cut %d connections, want 1", n)
	}
	mustBeCut(t, c)
}

func TestDropRepliesLosesOnlyTheReply(t *testing.T) {
	s := startEcho(t)
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	mustEcho(t, c, "warm")
	<-s.got
	p.DropReplies(true)
	if _, err := c.Write([]byte("req")); err != nil {
		t.Fatal(err)
	}
	if got := <-s.got; got != "req" {
		t.Fatalf("the server got %q, want the request", got)
	}
	mustBeCut(t, c)
	if n := p.RepliesDropped(); n != 1 {
		t.Errorf("RepliesDropped = %d, want 1", n)
	}
	p.DropReplies(false)
	mustEcho(t, dial(t, p), "back")
	if n := p.RepliesDropped(); n != 1 {
		t.Errorf("RepliesDropped after DropReplies(false) = %d, want 1", n)
	}
}

func TestBlackholeSwallowsBothWays(t *testing.T) {
	s := startEcho(t)
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	mustEcho(t, c, "before")
	<-s.got
	p.Blackhole(true)
	mustBeSilent(t, c, "lost", 200*time.Millisecond)
	mustBeSilent(t, dial(t, p), "new and lost", 200*time.Millisecond)
	select {
	case got := <-s.got:
		t.Fatalf("the server got %q through the hole", got)
	default:
	}
	p.Blackhole(false)
	mustEcho(t, dial(t, p), "after")
}

func TestStallExistingLeavesNewConnectionsWorking(t *testing.T) {
	s := startEcho(t)
	p := newProxy(t, s.ln.Addr().String())
	old := dial(t, p)
	mustEcho(t, old, "before")
	p.StallExisting()
	mustEcho(t, dial(t, p), "new")
	mustBeSilent(t, old, "stalled", 200*time.Millisecond)
}

func TestSetDelayBothWays(t *testing.T) {
	s := startEcho(t)
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	mustEcho(t, c, "warm")
	p.SetDelay(60 * time.Millisecond)
	start := time.Now()
	mustEcho(t, c, "slow")
	if el := time.Since(start); el < 120*time.Millisecond {
		t.Errorf("round trip %v with 60ms each way", el)
	}
	p.SetDelay(0)
	mustEcho(t, c, "fast again")
}

func TestCloseEndsConnections(t *testing.T) {
	s := startEcho(t)
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	mustEcho(t, c, "x")
	p.Close()
	p.Close()
	mustBeCut(t, c)
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Error("a closed proxy accepted a connection")
	}
	p.CutAll()
	p.Blackhole(true)
}
