package api

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
)

// FuzzCursorVector checks the Last-Event-ID of the agent stream, the one
// header of the stream a client sends back: parseVector never panics; what
// it accepts has no negative seq and reads back from its String; and the
// vector of any group the relay can hold (any envelope context: one line,
// not empty) is a valid SSE id that parses back to the same vector.
func FuzzCursorVector(f *testing.F) {
	for _, s := range []string{"", "deploy:3", "default:1,deploy:12", "a:b:2", "x:-1", ":1", "a:1,a:2", "a%2Cb:1"} {
		f.Add(s, "deploy", int64(1))
	}
	f.Add("", "a,b", int64(7))
	f.Add("", "100% done: yes", int64(0))
	f.Fuzz(func(t *testing.T, s, group string, seq int64) {
		if v, err := parseVector(s); err == nil {
			for g, n := range v {
				if g == "" || n < 0 {
					t.Fatalf("parseVector(%q) = %v: group %q seq %d", s, v, g, n)
				}
			}
			back, err := parseVector(v.String())
			if err != nil || !maps.Equal(back, v) {
				t.Fatalf("parseVector(%q) = %v; String %q parses to %v, %v", s, v, v.String(), back, err)
			}
		}
		if group == "" || seq < 0 || strings.ContainsAny(group, "\r\n") {
			return
		}
		v := cursorVector{group: seq, "default": 1}
		id := v.String()
		if strings.ContainsAny(id, "\r\n\x00") {
			t.Fatalf("cursorVector%v.String() = %q: not a valid SSE id", v, id)
		}
		back, err := parseVector(id)
		if err != nil || !maps.Equal(back, v) {
			t.Fatalf("parseVector(%q) = %v, %v; want %v", id, back, err, v)
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
