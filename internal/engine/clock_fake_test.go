package engine

import "os"

// modelRuns is how many random sequences a model test runs, and how long
// each is: a short run in every test run, a long one with
// LEASEHOLD_MODEL_LONG=1 (make model-long).
func modelRuns() (sequences, steps int) {
	if os.Getenv("LEASEHOLD_MODEL_LONG") == "1" {
		return 5000, 2000
	}
	return 300, 300
}
