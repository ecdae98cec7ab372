package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// BenchmarkDeliveries measures an agent's inbox over a group of 2 000
// messages on SQLite: what `crosstalk inbox`, MCP list_events and the web
// agent page pay per call.
func BenchmarkDeliveries(b *testing.B) {
	st, err := sqlite.Open(context.Background(), b.TempDir()+"/l.db", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r := gateway.New(st, nil)
	var text strings.Builder
	for i := 0; i < 2000; i++ {
		to := []string{"CLAUDE", "GEMINI", "@reviewer", "ALL"}[i%4]
		e := envelope.New("CHATGPT", to, envelope.IntentRequest, fmt.Sprintf("message %d", i))
		e.Context = "g"
		m, _ := envelope.Marshal(e)
		text.Write(m)
		if i%100 == 99 {
			if _, err := r.Ingest(context.Background(), gateway.Intake{Transport: "bench", Data: strings.NewReader(text.String())}); err != nil {
				b.Fatal(err)
			}
			text.Reset()
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ds, err := r.Deliveries(context.Background(), "claude", "g", 0, 0)
		if err != nil || len(ds) != 2000 {
			b.Fatalf("Deliveries = %d, %v", len(ds), err)
		}
	}
}
