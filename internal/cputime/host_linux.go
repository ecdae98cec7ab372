//go:build linux

package cputime

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Host returns the machine's CPU time so far from /proc/stat's cpu line,
// in clock ticks: all of it (idle included), idle and iowait, and steal
// (time the hypervisor ran something else while a virtual CPU wanted to
// run). A zero Ticks means it could not be read.
func Host() Ticks {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return Ticks{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return Ticks{}
	}
	return parseCPULine(sc.Text())
}

// parseCPULine reads the aggregate "cpu  user nice system idle iowait irq
// softirq steal …" line of /proc/stat; guest time is already within user
// and nice, so it is not added again.
func parseCPULine(line string) Ticks {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return Ticks{}
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return Ticks{}
		}
		v[i] = n
	}
	var t Ticks
	for _, n := range v {
		t.All += n
	}
	t.Idle, t.Steal = v[3]+v[4], v[7]
	return t
}
