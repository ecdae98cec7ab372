package channel_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/channel"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// countingTransport counts the requests whose path ends in suffix.
type countingTransport struct {
	suffix string
	n      atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, c.suffix) {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestInitializeReadsCursorsOnce: a harness over a remote relay (as
// `crosstalk harness --relay` runs it, over stdio) with many groups learns
// every group's resume point from one GET /v1/agents/{a}/cursors. It used
// to read that endpoint, which answers for every group, once per group:
// work that grew with the square of the groups at every (re)connect.
func TestInitializeReadsCursorsOnce(t *testing.T) {
	r := testrelay.Start(t, nil)
	const groups = 40
	want := map[string]int64{}
	for i := range groups {
		g := fmt.Sprintf("g%02d", i)
		for range 1 + i%3 {
			ev := r.Send(t, "CHATGPT", "CLAUDE", "INFORM", "hello", g, "")
			if i%4 == 3 {
				continue // no delivery cursor in this group
			}
			if _, err := r.Relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDelivered, Group: g, EventID: ev.ID, Actor: "claude"}); err != nil {
				t.Fatalf("delivered %s in %s = %v", ev.ID, g, err)
			}
			want[g] = ev.Seq
		}
	}
	count := &countingTransport{suffix: "/cursors"}
	remote := &c2a.Remote{URL: r.URL, Retries: -1, Client: &http.Client{Transport: count}}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- channel.Serve(t.Context(), channel.NewStreamConn(inR, outW, nil, 0), channel.Options{Agent: "claude", Backend: remote})
		outW.Close()
	}()
	fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q}}`+"\n", c2a.ProtocolVersion)
	line, err := bufio.NewReader(outR).ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading the answer to initialize: %v", err)
	}
	inW.Close()
	go io.Copy(io.Discard, outR)
	<-done
	var res struct {
		Result struct {
			Resume map[string]int64 `json:"resume"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &res); err != nil || res.Error != nil {
		t.Fatalf("initialize answered %s (%v)", line, err)
	}
	if len(res.Result.Resume) != groups {
		t.Errorf("resume has %d groups, want %d", len(res.Result.Resume), groups)
	}
	for i := range groups {
		g := fmt.Sprintf("g%02d", i)
		if got := res.Result.Resume[g]; got != want[g] {
			t.Errorf("resume[%s] = %d, want %d", g, got, want[g])
		}
	}
	if n := count.n.Load(); n != 1 {
		t.Errorf("initialize read /cursors %d times for %d groups, want once", n, groups)
	}
}
