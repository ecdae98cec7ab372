package envelope

import (
	"strings"
	"testing"
)

// checkValueByTrim is checkValue as it was written first, with the
// library's ContainsAny and Trim.
func checkValueByTrim(k, v string) error {
	if strings.ContainsAny(v, "\r\n") {
		return invalid("%s value contains a line break", k)
	}
	if v != strings.Trim(v, " \t") {
		return invalid("%s value %q has surrounding space", k, v)
	}
	return nil
}

func sameCheckValue(t *testing.T, v string) {
	t.Helper()
	got, want := checkValue("k", v), checkValueByTrim("k", v)
	if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
		t.Fatalf("checkValue(%q) = %v, by Trim %v", v, got, want)
	}
}

func TestCheckValueSameAsTrim(t *testing.T) {
	for _, v := range []string{
		"", " ", "\t", "\r", "\n", "a", " a", "a ", "\ta", "a\t", "a b", "a\tb", "a\rb", "a\nb", " a\n",
		"\u00a0a", "a\u00a0", "\u3000", "\v", "\f", "a\x00", "\xff", " \xff", "\xff\t", "é", "ab ", "  ab  ",
	} {
		sameCheckValue(t, v)
	}
}

func FuzzCheckValue(f *testing.F) {
	for _, v := range []string{"", " a", "a\t", "a\nb", "\u00a0", "\xff "} {
		f.Add(v)
	}
	f.Fuzz(sameCheckValue)
}

// BenchmarkWriterReceipt writes a relay's receipt: go test -run '^$'
// -bench WriterReceipt -benchmem ./envelope
func BenchmarkWriterReceipt(b *testing.B) {
	orig := New("BENCH", "READER", IntentRequest, "Please review the change.")
	orig.User, orig.Context = "bench", "bench-3"
	e := NewReply(orig, IntentAck, "recorded")
	e.Meta = []Meta{{Namespace: "receipt", Fields: []Field{
		{Key: "Event-ID", Value: NewID()}, {Key: "Group", Value: "bench-3"}, {Key: "Seq", Value: "123456"},
		{Key: "Duplicate", Value: "false"}, {Key: "Verification", Value: "verified"},
	}}}
	w := NewWriter(discard{})
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(e); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
