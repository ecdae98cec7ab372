package api

import (
	"maps"
	"strings"
	"testing"
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
