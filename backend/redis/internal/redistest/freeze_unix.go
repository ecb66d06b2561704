//go:build unix

package redistest

import "syscall"

// Freeze stops the server's process (SIGSTOP) until Thaw, or until the test
// ends: what a host that hangs, or a partition, looks like to its clients.
// Connections stay open and nothing answers; unlike Kill, which on loopback
// resets every connection at once, no call learns of the fault before its
// own timeout.
func (s *Server) Freeze() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	s.t.Cleanup(s.Thaw) // before Kill, registered earlier
}

// Thaw lets a frozen server run again (SIGCONT). It is idempotent.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Errorf("signal %v to redis-server on port %d: %v", sig, s.port, err)
	}
}
