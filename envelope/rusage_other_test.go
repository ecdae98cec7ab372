//go:build !unix

package envelope_test

// peakRSSMiB is not known without getrusage(2).
func peakRSSMiB() (float64, bool) { return 0, false }
