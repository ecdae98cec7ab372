package envelope

import (
	"strings"
	"testing"
)

const oneEnvelope = "[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\nbody: |\n  hello\nsig: none\n[[END]]\n"

// A Reader holds a line buffer only while it holds unread input, so that a
// caller that stops after one envelope leaves nothing behind (issue 19).
func TestReaderHoldsNoBufferWhenNothingIsUnread(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		holds  bool
		reason string
	}{
		{"one envelope", oneEnvelope, false, "everything was read"},
		{"text after it", oneEnvelope + "more chat\n", true, "the rest of the input is buffered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.in))
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
			if got := r.sc.buf != nil; got != tc.holds {
				t.Errorf("after Next the Reader holds a buffer: %v, want %v (%s)", got, tc.holds, tc.reason)
			}
		})
	}
}
