package envelope_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// smallV11 is internal/bench/parsevsjs's "v1.1-small" input, built the
// same way: three ids, a META block of three fields, REQUEST, and lines of
// prose added to the body until the envelope is at least 1 300 bytes.
var smallV11 = func() []byte {
	const line = "The deploy pipeline is green again; the flaky test was a race in the cache warm-up."
	var lines []string
	for {
		lines = append(lines, line)
		e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, strings.Join(lines, "\n"))
		e.User, e.Session, e.Context = "kalle", "2025-10-09T16Z abc123", "deploy-status"
		e.Thread, e.Parent, e.Message = "01J9J3D9C2V8M4P1R6S8T9V0V1", "01J9J3DBC4N7P2Q3R5S7T9V1V2", "01J9J3DCZ5P8Q2R4S6T8V0W1X3"
		e.Meta = []envelope.Meta{{Namespace: "routing", Fields: []envelope.Field{
			{Key: "X-Route", Value: "claude://session/abc → chatgpt://thread/xyz"}, {Key: "X-Reply-To", Value: "claude://session/abc"}, {Key: "X-Priority", Value: "high"}}}}
		e.Sig = "none"
		b, err := envelope.Marshal(e)
		if err != nil {
			panic(err)
		}
		if len(b) >= 1300 {
			return b
		}
	}
}()

// BenchmarkSmallV11 is each of the three ways parsevsjs times ours, on its
// small v1.1 input, one envelope per iteration. Its allocations are exact;
// run it under callgrind with a fixed -benchtime=Nx for instruction counts
// (docs/performance.md, "Session 12").
func BenchmarkSmallV11(b *testing.B) {
	if len(smallV11) != 1305 {
		b.Fatalf("input is %d bytes, parsevsjs's is 1305", len(smallV11))
	}
	for _, p := range []struct {
		name string
		fn   func([]byte) (*envelope.Envelope, error)
	}{
		{"Unmarshal", envelope.Unmarshal},
		{"NewReader.Next", func(d []byte) (*envelope.Envelope, error) { return envelope.NewReader(bytes.NewReader(d)).Next() }},
		{"NewBytesReader.Next", func(d []byte) (*envelope.Envelope, error) { return envelope.NewBytesReader(d).Next() }},
	} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(smallV11)))
			for b.Loop() {
				if _, err := p.fn(smallV11); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
