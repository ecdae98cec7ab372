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

// BenchmarkOpenSets measures the open-set queries over 10 groups of 1 000
// messages on SQLite, one in ten an obligation, against the baseline of
// reading the same agent's deliveries of every group (Deliveries), in the
// same run: what `crosstalk inbox --owe`, GET …/owe, chat.owe and the web
// agent page pay per call.
func BenchmarkOpenSets(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir()+"/l.db", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r := gateway.New(st, nil)
	for g := range 10 {
		var text strings.Builder
		for i := range 1000 {
			to := []string{"CLAUDE", "GEMINI", "@reviewer", "ALL"}[i%4]
			e := envelope.New("CHATGPT", to, envelope.IntentRequest, fmt.Sprintf("message %d", i))
			e.Context = fmt.Sprintf("g%d", g)
			if i%10 == 0 {
				e.To = "CLAUDE"
				e.Meta = []envelope.Meta{{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}}}}
			}
			m, _ := envelope.Marshal(e)
			text.Write(m)
			if i%100 == 99 {
				if _, err := r.Ingest(ctx, gateway.Intake{Transport: "bench", Data: strings.NewReader(text.String())}); err != nil {
					b.Fatal(err)
				}
				text.Reset()
			}
		}
	}
	b.Run("deliveries-baseline", func(b *testing.B) {
		for b.Loop() {
			if ds, err := r.Deliveries(ctx, "claude", "", 0, 0); err != nil || len(ds) != 10000 {
				b.Fatalf("Deliveries = %d, %v", len(ds), err)
			}
		}
	})
	b.Run("owed", func(b *testing.B) {
		for b.Loop() {
			if p, err := r.Owed(ctx, "claude", gateway.OpenSetQuery{Limit: 50}); err != nil || len(p.Items) != 50 {
				b.Fatalf("Owed = %d, %v", len(p.Items), err)
			}
		}
	})
	b.Run("waiting-on", func(b *testing.B) {
		for b.Loop() {
			if p, err := r.WaitingOn(ctx, "chatgpt", gateway.OpenSetQuery{Limit: 50}); err != nil || len(p.Items) != 50 {
				b.Fatalf("WaitingOn = %d, %v", len(p.Items), err)
			}
		}
	})
}
