package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// seedLedger writes one REQUEST from chatgpt to claude into DIR/ledger.db.
func seedLedger(t *testing.T, dir string) string {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	text, _ := envelope.Marshal(envelope.New("CHATGPT", "CLAUDE", "REQUEST", "is the deploy blocked?"))
	outs, err := gateway.New(st, nil).Ingest(t.Context(), gateway.Intake{Transport: "test", Data: strings.NewReader(string(text))})
	if err != nil || outs[0].Reject != nil {
		t.Fatalf("Ingest() = %v, %+v", err, outs)
	}
	return outs[0].Event.ID
}

// TestHarnessStdio runs `crosstalk harness --data DIR` in-process: a
// harness on stdin/stdout initializes, gets the event, acknowledges it,
// and a second run resumes after it.
func TestHarnessStdio(t *testing.T) {
	dir := t.TempDir()
	id := seedLedger(t, dir)
	run1 := func(ack bool) (delivered string) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"harness", "--agent", "claude", "--data", dir}, inR, outW, io.Discard)
			outW.Close()
		}()
		send := func(s string) {
			if _, err := io.WriteString(inW, s+"\n"); err != nil {
				t.Errorf("writing to the harness: %v", err)
			}
		}
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		send(`{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocolVersion":"2026-06-02","capabilities":{}}}`)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					EventID string `json:"eventId"`
				} `json:"params"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("harness wrote %q: %v", sc.Text(), err)
			}
			if m.Method == "chat/deliver" {
				delivered = m.Params.EventID
				if ack {
					send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"disposition":"responded"}}`)
				}
				break
			}
			if m.Method == "" && string(m.ID) == `"1"` && !ack {
				// Second run: nothing may be delivered; wait a little.
				go func() { time.Sleep(500 * time.Millisecond); inW.Close() }()
			}
		}
		inW.Close()
		go io.Copy(io.Discard, outR)
		if code := <-done; code != exitOK {
			t.Errorf("crosstalk harness exit code %d", code)
		}
		return delivered
	}
	if got := run1(true); got != id {
		t.Fatalf("first run delivered %q, want %s", got, id)
	}
	if got := run1(false); got != "" {
		t.Fatalf("second run delivered %q, want nothing: the event was acknowledged", got)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, _ := st.Range(t.Context(), gateway.DefaultGroup, 0, []string{gateway.KindDisposition}, 0)
	if len(evs) != 1 || !strings.Contains(string(evs[0].Data), "responded") {
		t.Errorf("dispositions = %v, want one responded", evs)
	}
}
