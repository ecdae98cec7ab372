package envelope_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

// FuzzReader checks, like age's FuzzMalleability, that for any input
// (a) the Reader never panics, (b) every failure is a *SyntaxError, and
// (c) every envelope it returns marshals, and the result reads back as the
// same value and formats to the same bytes.
func FuzzReader(f *testing.F) {
	names, err := fixtures.Envelopes()
	if err != nil || len(names) == 0 {
		f.Fatalf("no fuzz seeds: fixtures.Envelopes() = %d names, %v", len(names), err)
	}
	for _, n := range names {
		b, err := fixtures.FS.ReadFile("envelope/" + n + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Add([]byte(basic), true)
	for _, c := range mangledCorpus() { // what chat UIs do to envelopes (v10diff_test.go)
		f.Add(c.in, false)
	}
	f.Fuzz(func(t *testing.T, in []byte, strict bool) {
		r := envelope.NewReader(bytes.NewReader(in))
		r.Strict = strict
		for i := 0; ; i++ {
			if i > len(in)+1 {
				t.Fatalf("Reader returned more results (%d) than the input has lines", i)
			}
			e, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var se *envelope.SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("Next() = %T %v, want *SyntaxError", err, err)
				}
				continue
			}
			b, err := envelope.Marshal(e)
			if err != nil {
				t.Fatalf("Marshal(%+v) = %v; everything that parses must be writable", e, err)
			}
			back := envelope.NewReader(bytes.NewReader(b))
			e2, err := back.Next()
			if err != nil {
				t.Fatalf("re-reading %q: %v", b, err)
			}
			assertSameValue(t, e2, e)
			b2, err := envelope.Marshal(e2)
			if err != nil || !bytes.Equal(b2, b) {
				t.Fatalf("Marshal is not idempotent:\n%q\n%q (%v)", b, b2, err)
			}
		}
	})
}
