package gateway_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// BenchmarkReceipt writes the receipt of an accepted envelope as the
// API answers a text/plain client: go test -run '^$' -bench Receipt ./gateway
func BenchmarkReceipt(b *testing.B) {
	r := gateway.New(memory.New(nil), nil)
	e := envelope.New("BENCH", "READER", envelope.IntentRequest, "Please review the change.")
	e.User, e.Context = "bench", "bench-3"
	text, err := envelope.Marshal(e)
	if err != nil {
		b.Fatal(err)
	}
	outs, err := r.Ingest(context.Background(), gateway.Intake{Transport: "http", Text: text})
	if err != nil || len(outs) != 1 || outs[0].Reject != nil {
		b.Fatalf("%v %+v", err, outs)
	}
	var buf bytes.Buffer
	envelope.NewWriter(&buf).Write(r.Receipt(outs[0]))
	b.Logf("%s", buf.Bytes())
	b.ReportAllocs()
	for b.Loop() {
		if err := envelope.NewWriter(io.Discard).Write(r.Receipt(outs[0])); err != nil {
			b.Fatal(err)
		}
	}
}
