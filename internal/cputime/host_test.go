package cputime

import "testing"

func TestTicksSub(t *testing.T) {
	for _, tc := range []struct {
		t, u, want Ticks
	}{
		{Ticks{All: 100, Idle: 40, Steal: 10}, Ticks{All: 50, Idle: 30, Steal: 5}, Ticks{All: 50, Idle: 10, Steal: 5}},
		{Ticks{All: 100, Idle: 20, Steal: 10}, Ticks{All: 50, Idle: 30, Steal: 5}, Ticks{All: 50, Idle: 0, Steal: 5}}, // iowait went back
		{Ticks{}, Ticks{All: 50, Idle: 30, Steal: 5}, Ticks{}},                                                        // the second reading failed
		{Ticks{All: 60, Idle: 38, Steal: 20}, Ticks{All: 50, Idle: 30, Steal: 5}, Ticks{All: 10, Idle: 8, Steal: 2}},  // never more than All
	} {
		if got := tc.t.Sub(tc.u); got != tc.want {
			t.Errorf("%+v.Sub(%+v) = %+v, want %+v", tc.t, tc.u, got, tc.want)
		}
	}
}
