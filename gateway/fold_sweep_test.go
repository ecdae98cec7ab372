package gateway_test

import (
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestDeliveriesNoUnicodeFold: the relay's own actor comparisons ignore
// the case of ASCII letters only (attention.SameActor). With
// strings.EqualFold, "ſam" (U+017F long s) counted as "sam": a buffering
// agent got sam's and ſam's fragments merged into one delivery from sam,
// and a message by ſam made sam a participant of its thread, so later
// messages there were to_my_role for sam. SAM in ASCII upper case is
// still sam.
func TestDeliveriesNoUnicodeFold(t *testing.T) {
	th := inThread("01J9ZQ3K8Y5V4W3X2Z1A0B9C8E")
	t.Run("buffered runs", func(t *testing.T) {
		for _, tt := range []struct {
			second string
			merged bool
		}{
			{"SAM", true},
			{"ſAM", false},
			{"ſam", false},
		} {
			r := testrelay.Start(t, &testrelay.Options{Agents: injectionAgents})
			r.Ingest(t, testrelay.Envelope("SAM", "CLAUDE", "RESPOND", "", "part one", th))
			r.Ingest(t, testrelay.Envelope(tt.second, "CLAUDE", "RESPOND", "", "part two", th))
			ds, err := r.Relay.Deliveries(t.Context(), "claude", "", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range ds {
				if d.Kind != gateway.KindDigest {
					got = append(got, d.From+": "+strings.ReplaceAll(d.Content, "\n\n", " + "))
				}
			}
			if merged := len(got) == 1; merged != tt.merged {
				t.Errorf("fragments from SAM and %s: claude's deliveries %q, want merged %v", tt.second, got, tt.merged)
			}
		}
	})
	t.Run("thread participation", func(t *testing.T) {
		for _, tt := range []struct {
			author string
			want   attention.Directedness
		}{
			{"SAM", attention.ToMyRole},
			{"ſAM", attention.ToOther},
			{"ſam", attention.ToOther},
		} {
			r := testrelay.Start(t, nil)
			r.Ingest(t, testrelay.Envelope(tt.author, "GEMINI", "REQUEST", "", "shall we?", th))
			later := r.Ingest(t, testrelay.Envelope("GEMINI", "CHATGPT", "RESPOND", "", "yes", th))
			ds, err := r.Relay.Deliveries(t.Context(), "sam", "", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := attention.Directedness("none")
			for _, d := range ds {
				if d.EventID == later.ID {
					got = d.Directedness
				}
			}
			if got != tt.want {
				t.Errorf("thread begun by %s: sam's delivery of a later message = %s, want %s", tt.author, got, tt.want)
			}
		}
	})
}
