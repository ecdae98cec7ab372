package gateway_test

import (
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
)

// TestAddressBookFoldedNames: the relay compares actors with Unicode case
// folding (strings.EqualFold: a token's principal against the agent a
// request acts for, an envelope's sender against its token), where "ſ"
// (long s) is "s" and "µ" (micro sign) is "μ" (Greek mu). So two agents
// whose names fold alike are refused as duplicates — else sam's token
// would act as ſam — and a name folding to a book name is that agent.
func TestAddressBookFoldedNames(t *testing.T) {
	for _, c := range []struct{ a, b gateway.Agent }{
		{gateway.Agent{ID: "sam"}, gateway.Agent{ID: "ſam"}},
		{gateway.Agent{ID: "µbot"}, gateway.Agent{ID: "μbot"}},
		{gateway.Agent{ID: "a", Names: []string{"ΣΟΦΙΑΣ"}}, gateway.Agent{ID: "b", Names: []string{"σοφιας"}}},
		{gateway.Agent{ID: "a", Names: []string{"SAM"}}, gateway.Agent{ID: "b", Names: []string{"ſAM"}}},
	} {
		if _, err := gateway.NewAddressBook([]gateway.Agent{c.a, c.b}); err == nil || !strings.Contains(err.Error(), "duplicate") && !strings.Contains(err.Error(), "both") {
			t.Errorf("NewAddressBook(%q, %q) = %v, want a duplicate error", c.a.ID, c.b.ID, err)
		}
	}
	book, err := gateway.NewAddressBook([]gateway.Agent{{ID: "sam", Names: []string{"SAM"}}, {ID: "μbot"}})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{"ſam": "sam", "ſAM": "sam", "SAM": "sam", "µbot": "μbot", "ΜBOT": "μbot"} {
		if got := book.ActorID(in); got != want {
			t.Errorf("ActorID(%q) = %q, want %q", in, got, want)
		}
		if a, ok := book.Agent(in); !ok || a.ID != want {
			t.Errorf("Agent(%q) = %q, %v, want %q", in, a.ID, ok, want)
		}
	}
}
