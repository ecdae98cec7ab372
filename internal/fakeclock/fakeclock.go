// Package fakeclock is a settable clock for tests: the relay, its ledger
// and its services take a func() time.Time (their Options.Now), and tests
// hand them Clock.Now to step time by hand instead of sleeping. It is
// safe for concurrent use. It does not fire timers: code that waits on
// time.After still waits in real time.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock that reads t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
