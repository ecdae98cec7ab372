package envelope

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/fixtures"
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

// A small envelope's source, body and field values share one allocation
// (envState.packed); the strings in it must stay what they were even if a
// caller breaks Source's contract and writes to it or appends to it.
func TestPackedSourceIsolated(t *testing.T) {
	const in = "[[CLAUDE→CHATGPT v1]]\nuser: kalle\nintent: REQUEST\nmeta: routing\nX-Route: a → b\nbody: |\n  line one\n    indented\n  line three\nsig: none\n[[END]]\n"
	for _, tc := range []struct {
		name  string
		parse func() (*Envelope, error)
	}{
		{"Unmarshal", func() (*Envelope, error) { return Unmarshal([]byte(in)) }},
		{"NewReader", func() (*Envelope, error) { return NewReader(strings.NewReader(in)).Next() }},
		{"NewBytesReader", func() (*Envelope, error) { return NewBytesReader([]byte(in)).Next() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := tc.parse()
			if err != nil {
				t.Fatal(err)
			}
			src := e.Source()
			if string(src) != in {
				t.Fatalf("source %q, want the input", src)
			}
			if cap(src) != len(src) {
				t.Errorf("source has %d bytes of spare capacity; an append to it would write over the body", cap(src)-len(src))
			}
			_ = append(src, strings.Repeat("x", 64)...)
			for i := range src {
				src[i] = '#'
			}
			if e.Body != "line one\n  indented\nline three" || e.From != "CLAUDE" || e.To != "CHATGPT" || e.User != "kalle" ||
				e.Intent != IntentRequest || e.Meta[0].Namespace != "routing" || e.Meta[0].Fields[0].Value != "a → b" || e.Sig != "none" {
				t.Errorf("after writing to the source, the envelope changed: %+v", *e)
			}
		})
	}
}

// writeEnvelope fills a buffer of sizeHint bytes without growing it, for
// every fixture in both forms: the hint is an upper bound.
func TestSizeHintBoundsTheCanonicalForm(t *testing.T) {
	names, err := fixtures.Envelopes()
	if err != nil || len(names) == 0 {
		t.Fatalf("fixtures.Envelopes() = %d names, %v", len(names), err)
	}
	checked := 0
	for _, n := range names {
		data, err := fixtures.FS.ReadFile("envelope/" + n + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		r := NewReader(bytes.NewReader(data))
		for {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil || checkWritable(e) != nil {
				continue
			}
			checked++
			for _, v10 := range []bool{false, true} {
				var b bytes.Buffer
				writeEnvelope(&b, e, v10)
				if b.Len() > sizeHint(e) {
					t.Errorf("%s (v10 %v): canonical form is %d bytes, sizeHint %d", n, v10, b.Len(), sizeHint(e))
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d fixture envelopes could be written", checked)
	}
}
