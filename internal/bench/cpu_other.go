//go:build !unix

package bench

import "time"

// processCPU returns 0 where getrusage(2) does not exist: the CPU figures
// of Scale are then zero.
func processCPU() time.Duration { return 0 }
