package fence

import "sync"

// Serial runs the requests of one resource one at a time, so that a
// request that passed its check is not overtaken by a newer holder's before
// its write: what a guard in front of a resource (httpfence, grpcfence)
// needs when its store is checked apart from the write. The zero value is
// ready to use; it forgets a resource once nobody holds or waits for it.
type Serial struct {
	mu    sync.Mutex
	locks map[string]*resourceLock
}

// resourceLock is one resource's lock; users counts those holding or
// waiting for it.
type resourceLock struct {
	mu    sync.Mutex
	users int
}

// Lock waits for resource's turn and returns the function that ends it.
func (s *Serial) Lock(resource string) (unlock func()) {
	s.mu.Lock()
	if s.locks == nil {
		s.locks = map[string]*resourceLock{}
	}
	l := s.locks[resource]
	if l == nil {
		l = &resourceLock{}
		s.locks[resource] = l
	}
	l.users++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.locks, resource)
		}
		s.mu.Unlock()
	}
}
