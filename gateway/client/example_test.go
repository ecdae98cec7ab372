package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// Example reads a relay's groups, and shows the relay's refusal as a
// typed error carrying its code.
func Example() {
	dir, _ := os.MkdirTemp("", "crosstalk-client-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	relay, err := server.Open(ctx, &server.Options{DataDir: dir, Tokens: map[string]string{"0123456789abcdef0123": "claude"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer relay.Shutdown(ctx)

	c := &client.Client{URL: relay.URL(), Token: "0123456789abcdef0123"}
	var res struct {
		Groups []struct{ ID string } `json:"groups"`
	}
	err = c.Do(ctx, client.Request{Method: "GET", Path: "/v1/groups", Retry: true}, &res)
	fmt.Println(len(res.Groups), err)

	anonymous := &client.Client{URL: relay.URL()}
	var ce *client.Error
	err = anonymous.Do(ctx, client.Request{Method: "GET", Path: "/v1/groups"}, nil)
	fmt.Println(errors.As(err, &ce), ce.Status)
	// Output:
	// 0 <nil>
	// true 401
}
