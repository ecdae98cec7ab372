//go:build unix

package envelope_test

import "syscall"

// peakRSSMiB returns the process's peak resident set size in MiB
// (getrusage(2) ru_maxrss, in KiB on Linux).
func peakRSSMiB() (float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return float64(ru.Maxrss) / 1024, true
}
