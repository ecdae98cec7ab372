package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/a2a"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// The bridge is mounted on the API, behind its gate; an A2A client finds
// the agent's card under /a2a/{agent}/.
func Example() {
	book, _ := gateway.NewAddressBook([]gateway.Agent{{ID: "claude", A2A: true}, {ID: "chatgpt"}})
	st := memory.New(time.Now)
	defer st.Close()
	relay := gateway.New(st, &gateway.Options{Book: book})
	a := api.New(relay, nil) // no tokens: loopback only, every caller is the local user
	bridge := a2a.New(relay, nil)
	defer bridge.Close()
	a.Handle(a2a.Prefix, bridge)
	srv := httptest.NewServer(a)
	defer srv.Close()

	card, err := agentcard.DefaultResolver.Resolve(context.Background(), srv.URL+"/a2a/claude")
	if err != nil {
		fmt.Println(err)
		return
	}
	in := card.SupportedInterfaces[0]
	fmt.Println(card.Name, in.ProtocolBinding, in.ProtocolVersion, in.URL == srv.URL+"/a2a/claude")
	fmt.Println(bridge.Agents())
	// Output:
	// claude JSONRPC 1.0 true
	// [claude]
}

// A card names the relay's endpoint for the agent and, with tokens, the
// bearer scheme.
func ExampleBridge_Card() {
	book, _ := gateway.NewAddressBook([]gateway.Agent{{ID: "claude", A2A: true}})
	relay := gateway.New(memory.New(time.Now), &gateway.Options{Book: book})
	bridge := a2a.New(relay, &a2a.Options{Bearer: true})
	defer bridge.Close()
	agent, _ := book.Agent("claude")
	card := bridge.Card(agent, "https://relay.example.org")
	b, _ := json.Marshal(card.SupportedInterfaces)
	fmt.Println(string(b))
	b, _ = json.Marshal(card.SecuritySchemes)
	fmt.Println(string(b))
	// Output:
	// [{"url":"https://relay.example.org/a2a/claude","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]
	// {"bearer":{"httpAuthSecurityScheme":{"description":"a crosstalk relay API token (docs/configuration.md)","scheme":"Bearer"}}}
}
