package api

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
)

// FuzzResumePoint checks the Last-Event-ID of the agent stream, the one
// header of the stream a client sends back: parseResume never panics,
// accepts only a non-negative number that reads back to itself, and
// refuses every old group:seq cursor list.
func FuzzResumePoint(f *testing.F) {
	for _, s := range []string{"", "0", "17", "-1", "deploy:3", "default:1,deploy:12", "1e3", " 5", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseResume(s, "position")
		if err != nil {
			return
		}
		if n < 0 || strconv.FormatInt(n, 10) != s {
			t.Fatalf("parseResume(%q) = %d, want a refusal or the same number", s, n)
		}
	})
}

// FuzzReadJSON checks the decoding of every JSON request body of the API
// (send, actions, notify): readJSON never panics, and a body it accepts is
// exactly one JSON value (or, where optional, blank) — nothing after the
// value is silently ignored.
func FuzzReadJSON(f *testing.F) {
	for _, s := range []string{
		`{"to":"CHATGPT","intent":"REQUEST","body":"hi","meta":[{"Namespace":"n","Fields":[{"Key":"k","Value":"v"}]}]}`,
		`{"to":"x","intent":"ACK"} {"to":"y"}`, `{"to":"x"}]`, `{"nope":1}`, "", "  \n", `null`, `[]`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, optional bool) {
		r := httptest.NewRequest("POST", "/v1/send", bytes.NewReader(body))
		var req gateway.SendRequest
		if err := readJSON(r, &req, optional); err != nil {
			return
		}
		trimmed := bytes.Trim(body, " \t\r\n")
		if len(trimmed) == 0 && optional {
			return
		}
		if !json.Valid(trimmed) {
			t.Fatalf("readJSON(%q) accepted a body that is not one JSON value", body)
		}
	})
}
