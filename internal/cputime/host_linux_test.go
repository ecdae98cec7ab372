//go:build linux

package cputime

import "testing"

func TestParseCPULine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Ticks
	}{
		{"cpu  100 2 30 400 5 6 7 8 9 10", Ticks{All: 558, Idle: 405, Steal: 8}},
		{"cpu  1 2 3 4 5 6 7 8", Ticks{All: 36, Idle: 9, Steal: 8}},
		{"cpu0 1 2 3 4 5 6 7 8", Ticks{}}, // one CPU's line, not the sum
		{"cpu  1 2 3 4 5 6 7", Ticks{}},   // no steal column
		{"cpu  1 2 3 x 5 6 7 8", Ticks{}}, // not a number
		{"", Ticks{}},
	} {
		if got := parseCPULine(tc.line); got != tc.want {
			t.Errorf("parseCPULine(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
	}
	if h := Host(); h.All == 0 || h.Idle > h.All || h.Steal > h.All {
		t.Errorf("Host() = %+v, want a reading of this machine", h)
	}
}
