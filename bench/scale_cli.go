package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// scaleConfigFrom is the scale run the command line asks for; an error names
// the flag at fault.
func scaleConfigFrom(f *cliFlags) (scaleConfig, error) {
	c := scaleConfig{
		Backend: f.base.Backend, RedisAddr: f.base.RedisAddr, PostgresDSN: f.base.PostgresDSN,
		Leases: f.scale, TTL: 3 * time.Second, Duration: f.base.Duration, CPUProfile: f.cpuProfile,
	}
	if f.scaleTTL {
		c.TTL = f.base.TTL
	}
	c.RenewEvery = f.renew
	if c.RenewEvery == 0 {
		c.RenewEvery = c.TTL / 3
	}
	c.Peer = (c.Backend == backendRedis && (len(f.locks) <= 1 || slices.Contains(f.locks, lockRedislock))) ||
		(c.Backend == backendMemory && (len(f.locks) <= 1 || slices.Contains(f.locks, lockGoroutinePerLock)))
	switch {
	case c.Backend != backendMemory && c.Backend != backendRedis && c.Backend != backendPostgres:
		return c, fmt.Errorf("%w: -scale runs with -backend memory, redis or postgres, not %q", errConfig, c.Backend)
	case c.TTL <= 0:
		return c, fmt.Errorf("%w: -ttl %v: must be positive", errConfig, c.TTL)
	case c.RenewEvery <= 0 || c.RenewEvery >= c.TTL:
		return c, fmt.Errorf("%w: -renew %v: must be positive and below the TTL (%v)", errConfig, c.RenewEvery, c.TTL)
	case c.Duration <= 0:
		return c, fmt.Errorf("%w: -duration %v: must be positive", errConfig, c.Duration)
	}
	for _, l := range f.locks {
		if l != lockLeasehold && l != lockRedislock {
			return c, fmt.Errorf("%w: -locks %s: -scale compares leasehold with redislock only", errConfig, l)
		}
	}
	return c, nil
}

// runScaleCLI is `go -C bench run . -scale N`: see runScale.
func runScaleCLI(ctx context.Context, f *cliFlags, stdout, stderr io.Writer) int {
	c, err := scaleConfigFrom(f)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitError
	}
	progress := func(s string) {
		if !f.quiet {
			fmt.Fprintln(stderr, s)
		}
	}
	rs, err := runScale(ctx, c, progress)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitError
	}
	if err := writeScale(stdout, f.format, c, rs); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitError
	}
	for _, r := range rs {
		if r.System == lockLeasehold && r.Losses > 0 {
			fmt.Fprintf(stderr, "bench: leasehold lost %d of %d leases on a healthy backend\n", r.Losses, r.Leases)
			return exitError
		}
	}
	return exitOK
}

func writeScale(w io.Writer, format string, c scaleConfig, rs []scaleResult) error {
	switch format {
	case "json":
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(rs)
	case "csv":
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"system", "backend", "leases", "acquire_all_s", "close_s", "renewals_per_s", "round_trips_per_s", "cpu_cores", "heap_bytes_per_lease", "setup_heap_bytes", "losses"})
		for _, r := range rs {
			_ = cw.Write([]string{r.System, r.Backend, strconv.Itoa(r.Leases), f3(r.AcquireAllSec), f3(r.CloseSec), f3(r.RenewalsPerSec),
				f3(r.RoundTripsPerSec), f3(r.CPUCores), f3(r.HeapPerLease), f3(r.SetupHeap), strconv.Itoa(r.Losses)})
		}
		cw.Flush()
		return cw.Error()
	}
	fmt.Fprintf(w, "scale: %d leases on %s, TTL %v renewed every %v, kept for %v\n\n", c.Leases, c.Backend, c.TTL, c.RenewEvery, c.Duration)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tacquire all s\tclose s\trenewals/s\tround trips/s\tCPU % of a core\theap B/lease\tsetup heap KiB\tlosses\tround trips vs leasehold\tCPU vs leasehold\t")
	base := rs[0]
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%d\t%s\t%s\t\n", r.System, r.AcquireAllSec, r.CloseSec, r.RenewalsPerSec,
			r.RoundTripsPerSec, 100*r.CPUCores, r.HeapPerLease, r.SetupHeap/1024, r.Losses, ratio(r.RoundTripsPerSec, base.RoundTripsPerSec), ratio(r.CPUCores, base.CPUCores))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		for cause, n := range r.LossCauses {
			fmt.Fprintf(w, "%s: %d lost: %s\n", r.System, n, cause)
		}
	}
	return nil
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func ratio(v, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v/base)
}
