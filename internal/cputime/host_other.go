//go:build !linux

package cputime

// Host returns zero where /proc/stat does not exist: host figures are then
// not reported.
func Host() Ticks { return Ticks{} }
