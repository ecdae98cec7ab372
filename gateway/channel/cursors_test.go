package channel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strings"
	"sync"
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

// resumeBackend is a backend that tells where to follow from.
type resumeBackend interface {
	c2a.Backend
	c2a.Resumer
}

// followRecorder records the positions FollowAll follows from.
type followRecorder struct {
	resumeBackend
	mu     sync.Mutex
	afters []int64
}

func (f *followRecorder) FollowAll(ctx context.Context, agent string, afterPos int64) iter.Seq2[gateway.Delivery, error] {
	f.mu.Lock()
	f.afters = append(f.afters, afterPos)
	f.mu.Unlock()
	return f.resumeBackend.FollowAll(ctx, agent, afterPos)
}

// TestChannelFollowsFromResumePoint: a channel over every group, local or
// over a remote relay, whose agent confirmed every delivery of a history
// in many groups follows the ledger from the end of that history (not
// from position 0) and delivers exactly the new events, groups created
// since included.
func TestChannelFollowsFromResumePoint(t *testing.T) {
	r := testrelay.Start(t, nil)
	for i := range 40 {
		g := fmt.Sprintf("g%d", i%8)
		ev := r.Send(t, "CHATGPT", "CLAUDE", "INFORM", fmt.Sprintf("old %d", i), g, "")
		r.Send(t, "CLAUDE", "CHATGPT", "INFORM", "own", "solo", "") // never a delivery for claude
		if _, err := r.Relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDelivered, Group: g, EventID: ev.ID, Actor: "claude"}); err != nil {
			t.Fatal(err)
		}
	}
	end, err := r.Store.LogBefore(t.Context(), 0, 1)
	if err != nil || len(end) != 1 {
		t.Fatalf("LogBefore = %v, %v", end, err)
	}
	for name, b := range map[string]resumeBackend{
		"local":  &c2a.Local{Relay: r.Relay},
		"remote": &c2a.Remote{URL: r.URL, Retries: -1},
	} {
		t.Run(name, func(t *testing.T) {
			var want []string
			for _, g := range []string{"g3", "new-" + name, "g5"} {
				want = append(want, r.Send(t, "GEMINI", "CLAUDE", "INFORM", "new in "+g, g, "").ID)
			}
			rec := &followRecorder{resumeBackend: b}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- channel.Serve(t.Context(), channel.NewStreamConn(inR, outW, nil, 0), channel.Options{Agent: "claude", Backend: rec})
				outW.Close()
			}()
			fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":%q}}`+"\n", c2a.ProtocolVersion)
			// The session's output is read apart from the acks written:
			// both pipes block.
			lines := make(chan []byte, 64)
			go func() {
				defer close(lines)
				out := bufio.NewReader(outR)
				for {
					line, err := out.ReadBytes('\n')
					if err != nil {
						return
					}
					lines <- line
				}
			}()
			var got []string
			for len(got) < len(want) {
				line, ok := <-lines
				if !ok {
					t.Fatalf("the session ended after %d deliveries", len(got))
				}
				var m channel.Message
				if err := json.Unmarshal(line, &m); err != nil {
					t.Fatal(err)
				}
				if m.Method != "chat/deliver" {
					continue
				}
				var ev c2a.Event
				if err := json.Unmarshal(m.Params, &ev); err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.EventID)
				fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
			}
			inW.Close()
			go func() {
				for range lines {
				}
			}()
			<-done
			if !slices.Equal(got, want) {
				t.Errorf("delivered %v, want the new events %v", got, want)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.afters) == 0 || rec.afters[0] < end[0].Pos {
				t.Errorf("FollowAll from positions %v, want from the history's end, %d, or after", rec.afters, end[0].Pos)
			}
		})
	}
}
