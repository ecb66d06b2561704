package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sharedRecord is the record every worker process writes to: a file mapped
// MAP_SHARED into each process, holding one fencing slot per name, then per
// process a progress counter and the number of holdings it has now. Slots are updated with atomic instructions,
// which are coherent across processes on one machine, so no lock is needed.
type sharedRecord struct {
	mem   []byte
	keys  int
	procs int
}

// createRecord makes the record file at path for keys names and procs
// processes, zeroed.
func createRecord(path string, keys, procs int) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("shared record: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(int64(8 * (keys + 2*procs))); err != nil {
		return fmt.Errorf("shared record: %w", err)
	}
	return nil
}

// openRecord maps the record file created by createRecord.
func openRecord(path string, keys, procs int) (*sharedRecord, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shared record: %w", err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 8*(keys+2*procs), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shared record: mmap: %w", err)
	}
	return &sharedRecord{mem: mem, keys: keys, procs: procs}, nil
}

func (r *sharedRecord) word(i int) *uint64 {
	return (*uint64)(unsafe.Pointer(&r.mem[8*i]))
}

// fence writes token into the slot of key: it is accepted when token is at
// least the highest token seen for key (a holder writes its own token more
// than once), and rejected otherwise. It returns whether it was accepted and
// the highest token seen before the write.
func (r *sharedRecord) fence(key int, token uint64) (ok bool, highest uint64) {
	w := r.word(key)
	for {
		cur := atomic.LoadUint64(w)
		if token < cur {
			return false, cur
		}
		if token == cur || atomic.CompareAndSwapUint64(w, cur, token) {
			return true, cur
		}
	}
}

// addProgress counts one acquisition of process proc.
func (r *sharedRecord) addProgress(proc int) { atomic.AddUint64(r.word(r.keys+proc), 1) }

// progress is the number of acquisitions of every process so far.
func (r *sharedRecord) progress() uint64 {
	var n uint64
	for p := range r.procs {
		n += atomic.LoadUint64(r.word(r.keys + p))
	}
	return n
}

// holdingNow adds d to the number of holdings of process proc.
func (r *sharedRecord) holdingNow(proc int, d int64) {
	atomic.AddUint64(r.word(r.keys+r.procs+proc), uint64(d))
}

// holders lists the processes that hold at least one name now.
func (r *sharedRecord) holders() []int {
	var ps []int
	for p := range r.procs {
		if int64(atomic.LoadUint64(r.word(r.keys+r.procs+p))) > 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

// close unmaps the record.
func (r *sharedRecord) close() error { return unix.Munmap(r.mem) }
