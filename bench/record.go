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
// process a progress counter, the number of holdings it has now and the
// number of its goroutines waiting for the hot name (name 0) now. Slots are
// updated with atomic instructions, which are coherent across processes on
// one machine, so no lock is needed. Chaos reads the last two to pick its
// victim: a holder to pause, a waiter to kill.
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
	if err := f.Truncate(int64(8 * recordWords(keys, procs))); err != nil {
		return fmt.Errorf("shared record: %w", err)
	}
	return nil
}

// recordWords is the size of the record in 64-bit words: a fencing slot per
// name, then three counters per process (progress, holdings, waiters).
func recordWords(keys, procs int) int { return keys + 3*procs }

// openRecord maps the record file created by createRecord.
func openRecord(path string, keys, procs int) (*sharedRecord, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shared record: %w", err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 8*recordWords(keys, procs), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
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

// hotKey is the name every distribution favours most: the only one of "hot",
// the first of "zipf". Chaos kill looks for a process waiting for it.
const hotKey = 0

// waitingNow adds d to the number of goroutines of process proc waiting for
// the hot name.
func (r *sharedRecord) waitingNow(proc int, d int64) {
	atomic.AddUint64(r.word(r.keys+2*r.procs+proc), uint64(d))
}

// waitersNotHolding lists the processes that have a goroutine waiting for
// the hot name and hold no name: killing one of them ends pending
// acquisitions only, never a holding.
func (r *sharedRecord) waitersNotHolding() []int {
	var ps []int
	for p := range r.procs {
		waiting := int64(atomic.LoadUint64(r.word(r.keys+2*r.procs+p))) > 0
		holding := int64(atomic.LoadUint64(r.word(r.keys+r.procs+p))) > 0
		if waiting && !holding {
			ps = append(ps, p)
		}
	}
	return ps
}

// close unmaps the record.
func (r *sharedRecord) close() error { return unix.Munmap(r.mem) }
