package main

import (
	"path/filepath"
	"sync/atomic"
	"testing"
)

// BenchmarkSharedRecordFence is the checker's cost inside a holding: one
// fencing write to the shared record (an atomic compare-and-swap on a mapped
// page) and one CLOCK_MONOTONIC read. It must stay far below the hand-off
// times it helps to measure.
//
//	go test -run '^$' -bench SharedRecord -count 6 ./bench | benchstat -
func BenchmarkSharedRecordFence(b *testing.B) {
	path := filepath.Join(b.TempDir(), "rec")
	if err := createRecord(path, 16, 1); err != nil {
		b.Fatal(err)
	}
	rec, err := openRecord(path, 16, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer rec.close()
	var token atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := token.Add(1)
			rec.fence(int(t%16), t)
			_ = monoNow()
		}
	})
}
