package fence

import (
	"testing"
	"time"
)

// One resource's holders take turns; another resource never waits for
// them; an idle resource is forgotten.
func TestSerial(t *testing.T) {
	var s Serial
	unlockA := s.Lock("a")
	second := make(chan func())
	go func() { second <- s.Lock("a") }()
	s.Lock("b")() // another resource: no wait
	select {
	case <-second:
		t.Fatal("a second holder of a got in while the first held it")
	case <-time.After(20 * time.Millisecond):
	}
	unlockA()
	select {
	case unlock := <-second:
		unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("the second holder of a never got its turn")
	}
	if n := len(s.locks); n != 0 {
		t.Errorf("%d resources remembered with nobody holding or waiting", n)
	}
}
