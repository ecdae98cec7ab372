package a2a_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
)

// BenchmarkRoundTrip measures one A2A round trip through the relay: a
// blocking SendMessage from chatgpt (Go SDK client, JSON-RPC over
// loopback) becomes an envelope in the ledger, claude answers it through
// POST /v1/send, and the reply completes the task. Clients sets how many
// callers send at once, each in its own group, each task waiting for its
// reply meanwhile. The ledger is SQLite, as a relay runs by default.
func BenchmarkRoundTrip(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			r := startRelayWith(b, setup{tokens: tokens, agents: book, sqlite: true})
			c := r.client(b, "tok-chatgpt", "claude")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// claude answers every request in every bench group.
			for g := range clients {
				group := fmt.Sprint("bench-", g)
				go func() {
					for ev, err := range r.Store.Follow(ctx, group, 0) {
						if err != nil {
							return
						}
						d, _ := gateway.ParseData(ev)
						if d.X == nil || d.X.Sender != "chatgpt" {
							continue
						}
						r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentRespond, Context: group, Parent: d.X.Envelope.Message, Body: "ok"})
					}
				}()
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := range clients {
				group := fmt.Sprint("bench-", g)
				wg.Go(func() {
					for i := g; i < b.N; i += clients {
						res, err := c.SendMessage(ctx, textMessage(group, "ping"))
						if err != nil {
							b.Error(err)
							return
						}
						if task, ok := res.(*sdk.Task); !ok || task.Status.State != sdk.TaskStateCompleted {
							b.Errorf("result %+v, want a completed task", res)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
