package channel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/channel"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// fuzzClock is the fixed time of the fuzz target's relays.
func fuzzClock() time.Time { return time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC) }

// fuzzLedger returns the export of a ledger holding a request to CHATGPT
// and a broadcast, so that every fuzz iteration can start from the same
// events (and event ids), and the id of the request.
func fuzzLedger(f *testing.F) (export []byte, eventID string) {
	f.Helper()
	st := memory.New(fuzzClock)
	defer st.Close()
	book, err := gateway.NewAddressBook(testrelay.Agents)
	if err != nil {
		f.Fatal(err)
	}
	r := gateway.New(st, &gateway.Options{Book: book, Now: fuzzClock})
	for _, text := range []string{
		"[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\ncontext: deploy\n\nbody: |\n  Is the deploy blocked?\n[[END]]\n",
		"[[GEMINI→ALL v1]]\nintent: BROADCAST\ncontext: deploy\n\nbody: |\n  status\n[[END]]\n",
	} {
		outs, err := r.Ingest(f.Context(), gateway.Intake{Transport: "test", Data: strings.NewReader(text)})
		if err != nil || len(outs) != 1 || outs[0].Reject != nil {
			f.Fatalf("Ingest() = %+v, %v", outs, err)
		}
		if eventID == "" {
			eventID = outs[0].Event.ID
		}
	}
	var buf bytes.Buffer
	if err := ledger.Export(f.Context(), st, &buf); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes(), eventID
}

// FuzzSession checks the JSON-RPC decoding of the channel (stdio framing,
// as `crosstalk harness` reads it) by running a whole session over the
// fuzzed input against an in-process relay: it never panics, ends without
// an error when the input ends, writes only JSON-RPC 2.0 messages, answers
// every request exactly once with either a result or an error of a
// documented code, and answers nothing else except with an error.
func FuzzSession(f *testing.F) {
	export, eventID := fuzzLedger(f)
	initMsg := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + c2a.ProtocolVersion + `","capabilities":{"utilities":{"logging":true,"progress":true}},"_meta":{"progressToken":7}}}`
	for _, s := range []string{
		initMsg,
		initMsg + "\n" + `{"jsonrpc":"2.0","id":"a","method":"chat/ack","params":{"eventId":"` + eventID + `","disposition":"answered"}}`,
		initMsg + "\n" + `{"jsonrpc":"2.0","id":"d","result":{"accepted":true,"disposition":"read"}}` + "\n" + `{"jsonrpc":"2.0","id":"deliver-` + eventID + `-1","result":{"accepted":false}}`,
		initMsg + "\n" + `{"jsonrpc":"2.0","id":2,"method":"chat/react","params":{"eventId":"` + eventID + `","signal":"working"}}` + "\n" + `{"jsonrpc":"2.0","id":3,"method":"chat/claim","params":{"eventId":"` + eventID + `"}}`,
		initMsg + "\n" + `{"jsonrpc":"2.0","id":4,"method":"chat/defer","params":{"eventId":"` + eventID + `","note":"later"}}` + "\n" + `{"jsonrpc":"2.0","id":5,"method":"chat/resolve","params":{"eventId":"` + eventID + `","group":"deploy"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"1.0","id":9}` + "\n" + `[1,2]` + "\n" + `{"jsonrpc":"2.0","id":{"x":1},"method":"chat/ack","params":[]}`,
		"\r\n  \n{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\r\n",
	} {
		f.Add([]byte(s))
	}
	book, err := gateway.NewAddressBook(testrelay.Agents)
	if err != nil {
		f.Fatal(err)
	}
	codes := map[int]bool{channel.CodeParseError: true, channel.CodeInvalidRequest: true, channel.CodeMethodNotFound: true,
		channel.CodeInvalidParams: true, channel.CodeInternal: true, channel.CodeConflict: true,
		channel.CodeNotInitialized: true, channel.CodePermissionDenied: true}
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		st := memory.New(fuzzClock)
		defer st.Close()
		if _, err := ledger.Import(ctx, st, bytes.NewReader(export)); err != nil {
			t.Fatal(err)
		}
		relay := gateway.New(st, &gateway.Options{Book: book, Now: fuzzClock})
		var out bytes.Buffer
		conn := channel.NewStreamConn(bytes.NewReader(in), &out, nil, 4096)
		err := channel.Serve(ctx, conn, channel.Options{Agent: "chatgpt", Backend: &c2a.Local{Relay: relay, Transport: "channel"},
			Heartbeat: time.Hour, AckTimeout: time.Hour, Now: fuzzClock})
		if err != nil {
			t.Fatalf("Serve(%q) = %v, want nil when the input ends", in, err)
		}

		// What the harness sent: how many answers each id must get. Lines
		// are framed as NewStreamConn frames them; an error about a
		// message whose id could not be read has id null, not counted.
		want := map[string]int{}
		for _, l := range bytes.SplitAfter(in, []byte("\n")) {
			if len(bytes.TrimSpace(l)) == 0 || len(l) > 4096+1 {
				continue
			}
			var m channel.Message
			switch {
			case json.Unmarshal(l, &m) != nil:
			case !plainID(m.ID): // an object, array or boolean id: answered with id null
			case m.JSONRPC != "2.0", m.IsRequest():
				want[compact(m.ID)]++
			case m.IsResponse(), m.IsNotification():
			default:
				want[compact(m.ID)]++
			}
		}
		delete(want, "")
		delete(want, "null")
		got := map[string]int{}
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if l == "" {
				continue
			}
			var m channel.Message
			if err := json.Unmarshal([]byte(l), &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("Serve(%q) wrote %q: not a JSON-RPC 2.0 message (%v)", in, l, err)
			}
			if m.Method != "" {
				continue // chat/deliver, ping, notifications
			}
			if len(m.ID) == 0 || (m.Error == nil) == (len(m.Result) == 0) {
				t.Fatalf("Serve(%q) wrote %q: a response needs an id and a result or an error, not both", in, l)
			}
			if m.Error != nil && !codes[m.Error.Code] {
				t.Fatalf("Serve(%q) wrote %q: undocumented error code %d", in, l, m.Error.Code)
			}
			if id := compact(m.ID); id != "null" {
				got[id]++
			}
		}
		for id, n := range want {
			if got[id] != n {
				t.Fatalf("Serve(%q): %d answers with id %s, want %d", in, got[id], id, n)
			}
		}
		for id, n := range got {
			if want[id] == 0 {
				t.Fatalf("Serve(%q): %d answers with id %s, which nothing asked for", in, n, id)
			}
		}
	})
}

// compact returns raw compacted, or raw itself when it is not JSON.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// plainID reports whether id is absent, null, a string or a number: the
// ids JSON-RPC 2.0 allows, which an answer repeats.
func plainID(id json.RawMessage) bool {
	c := compact(id)
	return c == "" || c == "null" || c[0] == '"' || c[0] == '-' || c[0] >= '0' && c[0] <= '9'
}
