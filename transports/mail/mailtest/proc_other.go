//go:build !linux

package mailtest

import (
	"os"
	"syscall"
)

// The stack runs Dovecot and Postfix as Linux packages (scripts/deps.sh)
// and relies on Linux process groups and parent-death signals; elsewhere
// it compiles, so that the tests that use it build, but finds no servers.

func groupAttr(bool) *syscall.SysProcAttr { return nil }

func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	if err := p.Kill(); err != nil && err != os.ErrProcessDone {
		return err
	}
	return nil
}

func kill(pid int) { killGroup(pid) }

func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}
