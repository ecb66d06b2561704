//go:build !unix

package redistest

// Freeze skips the test: only Unix can stop a process from outside.
func (s *Server) Freeze() { s.t.Skip("freezing a process (SIGSTOP) needs Unix") }

// Thaw does nothing here.
func (s *Server) Thaw() {}
