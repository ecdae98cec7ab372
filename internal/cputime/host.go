package cputime

// Ticks is a reading of the machine's CPU time in clock ticks (Host).
type Ticks struct {
	All   uint64 // every CPU state, idle and steal included
	Idle  uint64 // idle and waiting for I/O
	Steal uint64 // wanted to run while the hypervisor ran something else
}

// Sub returns the ticks from u to t, for a reading u taken before t. A
// count that went back (iowait may, proc(5) says) or a failed reading
// (zero) gives 0, never a wrapped-around count, and Idle and Steal never
// exceed All.
func (t Ticks) Sub(u Ticks) Ticks {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	all := d(t.All, u.All)
	idle := min(d(t.Idle, u.Idle), all)
	return Ticks{All: all, Idle: idle, Steal: min(d(t.Steal, u.Steal), all-idle)}
}

// Add returns the sum of t and u.
func (t Ticks) Add(u Ticks) Ticks {
	return Ticks{All: t.All + u.All, Idle: t.Idle + u.Idle, Steal: t.Steal + u.Steal}
}
