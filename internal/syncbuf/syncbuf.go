// Package syncbuf provides Buffer, a byte buffer that one goroutine may
// write (a logger, a command running in the background) while another
// reads it: what tests hand to a component whose output they inspect.
//
// It is not a general-purpose concurrent buffer: it offers only Write and
// String, each holding one lock.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent Write and String. The
// zero value is an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
