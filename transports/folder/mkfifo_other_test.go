//go:build !unix

package folder_test

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs on this platform") }
