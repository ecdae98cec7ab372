package reserve

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{in: "src/lib", want: "src/lib"},
		{in: "./src/lib", want: "src/lib"},
		{in: "src/lib/", want: "src/lib"},
		{in: "src//lib///", want: "src/lib"},
		{in: "src/./lib/./parser.ts", want: "src/lib/parser.ts"},
		{in: "src/x/../lib", want: "src/lib"},
		{in: `src\lib\parser.ts`, want: "src/lib/parser.ts"},
		{in: "src/*", want: "src/*"},
		{in: "./src//*", want: "src/*"},
		{in: "src/lib/../*", want: "src/*"},
		{in: "*", want: "*"},
		{in: "./*", want: "*"},
		{in: ".", want: "."},
		{in: "./", want: "."},
		{in: "a/..", want: "."},
		{in: "Src/Lib", want: "Src/Lib"},
		{in: "..", err: ErrEscapesRoot},
		{in: "../x", err: ErrEscapesRoot},
		{in: "src/../../x", err: ErrEscapesRoot},
		{in: "src/../../*", err: ErrEscapesRoot},
		{in: "/etc/passwd", err: ErrEscapesRoot},
		{in: `\\server\share`, err: ErrEscapesRoot},
		{in: `C:\repo\src`, err: ErrEscapesRoot},
		{in: "", err: ErrBadScope},
		{in: "src/*.ts", err: ErrBadScope},
		{in: "src/**", err: ErrBadScope},
		{in: "*/lib", err: ErrBadScope},
		{in: "src\x00lib", err: ErrBadScope},
		{in: "src\nlib", err: ErrBadScope},
		{in: "src/\u202egnp.exe", err: ErrBadScope},
		{in: "src/a\u200bb", err: ErrBadScope},
		{in: "src/\x7f", err: ErrBadScope},
		{in: "src/\xff", err: ErrBadScope},
		{in: "src/cafe\u0301", want: "src/caf\u00e9"},
		{in: strings.Repeat("a/", MaxScopeLen), err: ErrBadScope},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.in)
		if tt.err != nil {
			var se *ScopeError
			if !errors.Is(err, tt.err) || !errors.As(err, &se) || se.Scope != tt.in {
				t.Errorf("Canonical(%q) = %q, %v; want a *ScopeError wrapping %v", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestClassify holds BeadBoard §5.3's required examples first, then our
// own edge cases.
func TestClassify(t *testing.T) {
	tests := []struct {
		a, b string
		want Class
	}{
		// §5.3 required examples.
		{"src/*", "src/lib/parser.ts", Partial},
		{"src/lib", "src/lib/parser.ts", Partial},
		{"src/lib/parser.ts", "src/lib/parser.ts", Exact},
		{"src/lib", "src/components", Disjoint},
		// Edge cases.
		{"./src/lib/", "src//lib", Exact},
		{"src/*", "src/*", Exact},
		{"src/*", "src", Partial},
		{"src/*", "src/lib/*", Partial},
		{"src/*", "srcs/x", Disjoint},
		{"src/lib", "src/lib2", Disjoint},
		{"src/lib/parser.ts", "src/lib/parser.ts.bak", Disjoint},
		{".", "docs/api.md", Partial},
		{"*", "docs/api.md", Partial},
		{"*", ".", Partial},
		{"docs/api.md", "src/auth/*", Disjoint},
		{"Src", "src", Disjoint},
	}
	for _, tt := range tests {
		a, err := Canonical(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Canonical(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := Classify(a, b); got != tt.want {
			t.Errorf("Classify(%q, %q) = %s, want %s", tt.a, tt.b, got, tt.want)
		}
		if got := Classify(b, a); got != tt.want {
			t.Errorf("Classify(%q, %q) = %s, want %s (symmetry)", tt.b, tt.a, got, tt.want)
		}
	}
}

// FuzzCanonical checks that the canonical form is idempotent, never
// escapes the root, and has no empty, "." or ".." segment.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"src/lib", "./src//*", "..", "a/../..", `a\b`, "*", ".", "/x", "src/*/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Canonical(s)
		if err != nil {
			var se *ScopeError
			if !errors.As(err, &se) || !(errors.Is(err, ErrBadScope) || errors.Is(err, ErrEscapesRoot)) {
				t.Fatalf("Canonical(%q): untyped error %v", s, err)
			}
			return
		}
		again, err := Canonical(c)
		if err != nil || again != c {
			t.Fatalf("Canonical(%q) = %q, but Canonical(%q) = %q, %v", s, c, c, again, err)
		}
		if c == "." || c == "*" {
			return
		}
		if strings.HasPrefix(c, "/") {
			t.Fatalf("Canonical(%q) = %q: absolute", s, c)
		}
		for _, seg := range strings.Split(strings.TrimSuffix(c, "/*"), "/") {
			if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, "*") {
				t.Fatalf("Canonical(%q) = %q: bad segment %q", s, c, seg)
			}
		}
		if Classify(c, c) != Exact {
			t.Fatalf("Classify(%q, itself) != exact", c)
		}
	})
}

// TestIndexMatchesClassify checks the table's index against Classify over
// every pair of a set of scopes: List(path) holds exactly the scopes that
// are not disjoint from path.
func TestIndexMatchesClassify(t *testing.T) {
	scopes := []string{".", "*", "src", "src/*", "src/lib", "src/lib/parser.ts", "srcs", "docs/*", "docs/api.md", "a", "a/b/c/*"}
	tb := NewTable()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, s := range scopes {
		tb.add(Reservation{ID: fmt.Sprint(i), Agent: "a", Scope: s, ExpiresAt: now.Add(time.Hour)})
	}
	for _, p := range scopes {
		rs, err := tb.List(now, p)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range rs {
			got[r.Scope] = true
		}
		for _, s := range scopes {
			if want := Classify(p, s) != Disjoint; got[s] != want {
				t.Errorf("List(%q) has %q = %v, want %v", p, s, got[s], want)
			}
		}
	}
}

// TestScopeErrorIsShort checks that a refused huge scope is not echoed
// whole into the error every caller and log receives.
func TestScopeErrorIsShort(t *testing.T) {
	_, err := Canonical("l/" + strings.Repeat("a", 100_000))
	if err == nil || len(err.Error()) > 1024 {
		t.Fatalf("Canonical(100 KB scope) error is %d bytes, want a refusal under 1 KB", len(fmt.Sprint(err)))
	}
}
