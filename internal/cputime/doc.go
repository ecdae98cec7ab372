// Package cputime reads CPU time for the bench commands' figures: the time
// this process has used (Process: getrusage(2) where it exists, unix, zero
// elsewhere), and the machine's own busy, idle and steal time (Host:
// /proc/stat on Linux, zero elsewhere), which says whether a measurement
// ran on a saturated or a hypervisor-starved machine. It is not a profiler.
package cputime
