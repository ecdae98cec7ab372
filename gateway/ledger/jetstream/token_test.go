package jetstream

import (
	"regexp"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	kvKey := regexp.MustCompile(`\A[-/_=.a-zA-Z0-9]+\z`)
	tests := []struct {
		in, want string
	}{
		{"ops", "ops"},
		{"chat.message", "chat=2Emessage"},
		{"x.crosstalk.claim", "x=2Ecrosstalk=2Eclaim"},
		{"dev team/é", "dev=20team=2F=C3=A9"},
		{"a=b", "a=3Db"},
		{"*", "=2A"},
		{">", "=3E"},
		{"sha256:ab", "sha256=3Aab"},
		{"Under_score-dash", "Under_score-dash"},
	}
	for _, tt := range tests {
		got := token(tt.in)
		if got != tt.want {
			t.Errorf("token(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if back, ok := untoken(got); !ok || back != tt.in {
			t.Errorf("untoken(%q) = %q, %v, want %q, true", got, back, ok, tt.in)
		}
		if !kvKey.MatchString(got) || strings.ContainsAny(got, ".*> ") {
			t.Errorf("token(%q) = %q is not a valid subject token and KV key part", tt.in, got)
		}
	}
	long := strings.Repeat("é", 100)
	h := token(long)
	if !strings.HasPrefix(h, "=H") || len(h) != 2+64 || !kvKey.MatchString(h) {
		t.Errorf("token(200-byte string) = %q, want =H and a hex SHA-256", h)
	}
	if h == token(long+"x") {
		t.Errorf("token() of two long strings is the same")
	}
	if _, ok := untoken(h); ok {
		t.Errorf("untoken(%q) ok = true, want false for a hashed token", h)
	}
	for _, bad := range []string{"=", "=4", "=ZZ", "a=G1"} {
		if s, ok := untoken(bad); ok {
			t.Errorf("untoken(%q) = %q, true, want false", bad, s)
		}
	}
}
