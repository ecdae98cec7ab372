package jetstream

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzToken checks the subject token encoding: token always makes a valid
// subject token and KV key part, untoken reverses it, and untoken accepts
// only tokens token makes (canonical ones), so one group can never be
// listed under two subjects. Seeded from TestToken's table.
func FuzzToken(f *testing.F) {
	kvKey := regexp.MustCompile(`\A[-/_=.a-zA-Z0-9]+\z`)
	for _, s := range []string{"ops", "chat.message", "dev team/é", "a=b", "*", ">", "sha256:ab", "=2e", "=61", strings.Repeat("é", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s != "" {
			tok := token(s)
			if !kvKey.MatchString(tok) || strings.ContainsAny(tok, ".*> ") || len(tok) > maxTokenLen {
				t.Fatalf("token(%q) = %q: not a valid subject token and KV key part", s, tok)
			}
			if back, ok := untoken(tok); ok != !strings.HasPrefix(tok, "=H") || ok && back != s {
				t.Fatalf("untoken(token(%q)) = untoken(%q) = %q, %v", s, tok, back, ok)
			}
		}
		// s as a subject token read from the stream.
		if back, ok := untoken(s); ok && token(back) != s {
			t.Fatalf("untoken(%q) = %q, true, but token(%q) = %q: two subjects for one name", s, back, back, token(back))
		}
	})
}
