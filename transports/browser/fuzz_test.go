package browser_test

import (
	"context"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/signing"
	"github.com/crosstalk-go/crosstalk/transports/browser"
)

// FuzzCheck: any page text gives a result, never a panic; every status is
// one the page knows; every envelope's Text parses back to one complete
// envelope; the trust store it returns reads back.
func FuzzCheck(f *testing.F) {
	names, _ := fixtures.Envelopes()
	for _, n := range names {
		b, _ := fixtures.FS.ReadFile("envelope/" + n + ".txt")
		f.Add(string(b))
	}
	statuses := map[string]bool{"verified": true, "first-use": true, "unsigned": true, "unknown-key": true,
		"invalid": true, "key-changed": true, "revoked": true, "error": true}
	f.Fuzz(func(t *testing.T, text string) {
		res, err := browser.Check(context.Background(), text, "")
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		for _, e := range res.Envelopes {
			if !statuses[e.Status] {
				t.Fatalf("status %q", e.Status)
			}
			if e.Status == "error" {
				if e.Reason == "" {
					t.Fatal("an error without a reason")
				}
				continue
			}
			env, err := envelope.NewReader(strings.NewReader(e.Text)).Next()
			if err != nil || !env.Complete {
				t.Fatalf("Text %q does not read back: %v", e.Text, err)
			}
		}
		if _, err := signing.NewMemoryTrustStore([]byte(res.Known)); err != nil {
			t.Fatalf("Known does not read back: %v", err)
		}
	})
}
