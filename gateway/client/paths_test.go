package client_test

import (
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/client"
)

// TestPathSegment: a name of dots after tildes gets one more tilde, every
// other name is url.PathEscape's, and FromSegment reads each back.
func TestPathSegment(t *testing.T) {
	for _, tc := range []struct{ name, seg string }{
		{".", "~."},
		{"..", "~.."},
		{"~.", "~~."},
		{"~~..", "~~~.."},
		{"...", "..."},
		{".x", ".x"},
		{"~deploy", "~deploy"},
		{"~", "~"},
		{"a b/c", "a%20b%2Fc"},
		{"café", "caf%C3%A9"},
	} {
		if got := client.PathSegment(tc.name); got != tc.seg {
			t.Errorf("PathSegment(%q) = %q, want %q", tc.name, got, tc.seg)
		}
		// What a server sees: the segment percent-decoded.
		decoded := map[string]string{"a%20b%2Fc": "a b/c", "caf%C3%A9": "café"}[tc.seg]
		if decoded == "" {
			decoded = tc.seg
		}
		if got := client.FromSegment(decoded); got != tc.name {
			t.Errorf("FromSegment(%q) = %q, want %q", decoded, got, tc.name)
		}
	}
}
