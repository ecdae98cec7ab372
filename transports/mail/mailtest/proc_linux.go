//go:build linux

package mailtest

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// groupAttr puts a server in its own process group, so Close can stop it
// with all its children by the group's id, and makes the kernel signal it
// if the test binary dies without Close (a timeout panic): SIGKILL when
// kill, else SIGTERM (the postfix watchdog stops postfix on SIGTERM).
func groupAttr(kill bool) *syscall.SysProcAttr {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}

// killGroup sends SIGKILL to the process group pid leads; a group already
// gone is no error.
func killGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// kill sends SIGKILL to pid.
func kill(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// alive reports whether pid runs; a zombie (this machine's PID 1 reaps
// orphans only after a second or two) counts as gone.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no procfs: trust kill
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
