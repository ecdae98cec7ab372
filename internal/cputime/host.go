package cputime

// Ticks is a reading of the machine's CPU time in clock ticks (Host).
type Ticks struct {
	All   uint64 // every CPU state, idle and steal included
	Idle  uint64 // idle and waiting for I/O
	Steal uint64 // wanted to run while the hypervisor ran something else
}

// Sub returns the ticks from u to t, for a reading u taken before t.
func (t Ticks) Sub(u Ticks) Ticks {
	return Ticks{All: t.All - u.All, Idle: t.Idle - u.Idle, Steal: t.Steal - u.Steal}
}

// Add returns the sum of t and u.
func (t Ticks) Add(u Ticks) Ticks {
	return Ticks{All: t.All + u.All, Idle: t.Idle + u.Idle, Steal: t.Steal + u.Steal}
}
