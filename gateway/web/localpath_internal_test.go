package web

import "testing"

// TestLocalPath checks that a redirect target a form carries can only
// name a path on this site, however a browser would read it.
func TestLocalPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/ui/groups/deploy", "/ui/groups/deploy"},
		{"/ui/agents/a?view=x#y", "/ui/agents/a?view=x#y"},
		{"", "/"},
		{"https://evil.example/", "/"},
		{"//evil.example/", "/"},
		{"/\\evil.example/", "/"},
		{"/\t/evil.example/", "/"},
		{"/\n/evil.example/", "/"},
		{"/\r\n/evil.example/", "/"},
		{"/ui/\\/evil.example", "/"},
		{"/ui\x00", "/"},
		{"/ui\x7f", "/"},
	} {
		if got := localPath(tc.in); got != tc.want {
			t.Errorf("localPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
