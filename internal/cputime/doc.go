// Package cputime reads the CPU time this process has used, for the bench
// commands' CPU figures: getrusage(2) where it exists (unix), zero
// elsewhere. It is not a profiler.
package cputime
