package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// Example starts a whole relay in-process on a free loopback port, with
// its SQLite ledger in a temporary directory, records one envelope over
// HTTP, and shuts the relay down.
func Example() {
	dir, err := os.MkdirTemp("", "crosstalk-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := server.Open(ctx, &server.Options{DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Shutdown(ctx)

	text, err := envelope.Marshal(envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "Is the deploy blocked?"))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := http.Post(s.URL()+"/crosstalk/receive", "text/plain; charset=utf-8", bytes.NewReader(text))
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println(res.Status)
	// Output: 200 OK
}
