package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/api"
)

// mapJSON is what the answers were written as before: one-key maps
// through an encoder without HTML escaping.
func mapJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReceiveAnswerBytes pins the answers of POST /crosstalk/receive
// byte for byte: the JSON as the one-key maps wrote it, and receipts as
// text/plain, the header value shared by every answer left unchanged.
func TestReceiveAnswerBytes(t *testing.T) {
	h := newHarness(t, nil)
	a := env("CHATGPT", "CLAUDE", "REQUEST", "topic", "one <&> \u2028")
	b := env("CLAUDE", "CHATGPT", "RESPOND", "topic", "two")

	status, body := h.do("POST", "/crosstalk/receive", a+"\n"+b, "Accept", "application/json")
	var out struct{ Results []api.Result }
	if err := json.Unmarshal(body, &out); err != nil || status != http.StatusOK {
		t.Fatalf("POST = %d %s, %v", status, body, err)
	}
	if want := mapJSON(t, map[string][]api.Result{"results": out.Results}); !bytes.Equal(body, want) {
		t.Errorf("JSON answer\n got %s\nwant %s", body, want)
	}

	status, body = h.do("POST", "/crosstalk/receive", strings.Replace(a, "REQUEST", "REQUEST\nbogus line", 1), "Accept", "application/json")
	var rej struct {
		Error *json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &rej); err != nil || status == http.StatusOK || rej.Error == nil {
		t.Fatalf("POST of a bad envelope = %d %s, %v", status, body, err)
	}
	if want := mapJSON(t, map[string]*json.RawMessage{"error": rej.Error}); !bytes.Equal(body, want) {
		t.Errorf("JSON rejection\n got %s\nwant %s", body, want)
	}

	for range 2 {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", h.srv.URL+"/crosstalk/receive", strings.NewReader(b))
		res, err := h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Values("Content-Type"); len(got) != 1 || got[0] != "text/plain; charset=utf-8" {
			t.Errorf("receipt Content-Type = %q", got)
		}
	}
}
