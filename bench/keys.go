package main

import (
	"math/rand/v2"
	"strconv"
)

// keyPicker chooses the name each acquisition goes for. Names are numbered
// 0..keys-1 so that the shared record can index them.
type keyPicker func() int

// newKeyPicker returns a picker for the distribution of c: "hot" always picks
// name 0 (every contender on one name), "uniform" picks any name with equal
// chance, "zipf" favours low-numbered names with exponent c.ZipfS. Each
// goroutine gets its own picker (seeded by seed) so that none shares a source.
func newKeyPicker(c runConfig, seed uint64) keyPicker {
	r := rand.New(rand.NewPCG(c.Seed, seed))
	switch {
	case c.Dist == "hot" || c.Keys == 1:
		return func() int { return 0 }
	case c.Dist == "zipf":
		z := rand.NewZipf(r, c.ZipfS, 1, uint64(c.Keys-1))
		return func() int { return int(z.Uint64()) }
	default:
		return func() int { return r.IntN(c.Keys) }
	}
}

// keyName is the lease name of key i in a run (the run's prefix keeps runs
// apart on a shared server).
func keyName(prefix string, i int) string { return prefix + "k" + strconv.Itoa(i) }
