package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
)

// TestConfigObligations: the `[obligations]` table's defaults, a file
// that sets it, returns = 0 for no returns, and the values refused.
func TestConfigObligations(t *testing.T) {
	c := DefaultConfig()
	if got := *c.Obligations.returns(); got != (gateway.ReturnsOptions{Interval: 15 * time.Minute, Returns: 3, CoordinatorRole: "coordinator"}) {
		t.Errorf("default returns = %+v", got)
	}
	c, err := decodeConfig("test.toml", []byte("[obligations]\nreturn_interval = \"1h\"\nreturns = 0\ncoordinator_role = \"lead\"\nhuman = \"pat\"\n"))
	if err != nil || c.Validate() != nil {
		t.Fatalf("decodeConfig = %v; Validate = %v", err, c.Validate())
	}
	o, err := c.serverOptions(slog.New(slog.DiscardHandler))
	if err != nil || o.Returns == nil || *o.Returns != (gateway.ReturnsOptions{Interval: time.Hour, Returns: 0, CoordinatorRole: "lead", Human: "pat"}) {
		t.Errorf("the relay's returns = %+v, %v", o.Returns, err)
	}
	// The human and the role in NFC, as the address book keeps ids.
	c.Obligations.Human, c.Obligations.CoordinatorRole = "jose\u0301", "le\u0301ad"
	if got := c.Obligations.returns(); got.Human != "jos\u00e9" || got.CoordinatorRole != "l\u00e9ad" {
		t.Errorf("returns() of NFD names = %q, %q; want NFC", got.Human, got.CoordinatorRole)
	}
	if _, err := decodeConfig("test.toml", []byte("[obligations]\nreturn = 2\n")); err == nil || !strings.Contains(err.Error(), "obligations.return") {
		t.Errorf("a typo in the table = %v, want it named", err)
	}
	for _, bad := range []ObligationsConfig{
		{ReturnInterval: duration(time.Second), Returns: 3, CoordinatorRole: "coordinator"},
		{ReturnInterval: duration(time.Hour), Returns: -1, CoordinatorRole: "coordinator"},
		{ReturnInterval: duration(time.Hour), Returns: 101, CoordinatorRole: "coordinator"},
		{ReturnInterval: duration(time.Hour), Returns: 3, CoordinatorRole: ""},
		{ReturnInterval: duration(time.Hour), Returns: 3, CoordinatorRole: "@lead"},
		{ReturnInterval: duration(time.Hour), Returns: 3, CoordinatorRole: "coordinator", Human: "pat\nx"},
		{ReturnInterval: duration(time.Hour), Returns: 3, CoordinatorRole: "lead\u200b"},
		{ReturnInterval: duration(time.Hour), Returns: 3, CoordinatorRole: "coordinator", Human: "p\u202eat"},
	} {
		c := DefaultConfig()
		c.Obligations = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "obligations.") {
			t.Errorf("Validate(%+v) = %v, want the field named", bad, err)
		}
	}
}
