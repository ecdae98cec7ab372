package gateway_test

import (
	"context"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestActionsNoUnicodeFold: what one actor may read, ack or claim is
// decided by its actor id with ASCII case folding only, as the ledger
// records actors. Of simple names outside the address book, "ſam" (U+017F
// long s), which strings.EqualFold joins to sam, is another actor
// (docs/security.md "Who speaks"): sam is not shown a message to or by
// ſam, may not ack a notice for ſam, nor claim a request to ſam. Nor is
// the book's bob, of role support, shown or given a message to @ſupport.
// The Turkish dotless ı keeps "kım" apart from kim too; an envelope name
// in ASCII upper case is still the agent. (A spelling of a book name that
// folds to it names the book's agent: TestAddressBookFoldedNames.)
func TestActionsNoUnicodeFold(t *testing.T) {
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "bob", Roles: []string{"support"}},
		{ID: "chatgpt", Names: []string{"CHATGPT"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, &gateway.Options{Book: book})
	ctx := context.Background()
	msg := func(from, to string) ledger.Event {
		t.Helper()
		outs := ingest(t, r, "", env(from, to, "REQUEST", "g", "q from "+from+" to "+to))
		if len(outs) != 1 || outs[0].Reject != nil {
			t.Fatalf("ingest %s→%s = %+v", from, to, outs)
		}
		return outs[0].Event
	}

	shown := []struct {
		name  string
		ev    ledger.Event
		actor string
		want  bool
	}{
		{"to SAM", msg("CHATGPT", "SAM"), "sam", true},
		{"by SAM", msg("SAM", "CHATGPT"), "sam", true},
		{"to @SUPPORT", msg("CHATGPT", "@SUPPORT"), "bob", true},
		{"to ſam", msg("CHATGPT", "ſam"), "sam", false},
		{"to ſAM", msg("CHATGPT", "ſAM"), "sam", false},
		{"by ſam", msg("ſam", "CHATGPT"), "sam", false},
		{"to kım", msg("CHATGPT", "k\u0131m"), "kim", false},
		{"to @ſupport", msg("CHATGPT", "@ſupport"), "bob", false},
	}
	for _, tt := range shown {
		if got := r.ShownTo(tt.ev, tt.actor); got != tt.want {
			t.Errorf("ShownTo(message %s, %s) = %v, want %v", tt.name, tt.actor, got, tt.want)
		}
	}

	ask := msg("CHATGPT", "SAM")
	notices := []struct {
		target, actor string
		ok            bool
	}{
		{"sam", "SAM", true},
		{"ſam", "sam", false},
		{"k\u0131m", "kim", false},
	}
	for _, tt := range notices {
		if err := r.NotifyAgent(ctx, tt.target, "n-"+tt.target, ask.ID, "claim_released", "your claim lapsed"); err != nil {
			t.Fatal(err)
		}
		notes, err := r.Store().Range(ctx, "n-"+tt.target, 0, []string{gateway.KindNotify}, 0)
		if err != nil || len(notes) != 1 {
			t.Fatalf("notices for %q = %+v, %v", tt.target, notes, err)
		}
		_, err = r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionAck, Group: "n-" + tt.target, EventID: notes[0].ID, Actor: tt.actor})
		if ok := err == nil; ok != tt.ok {
			t.Errorf("ack of %q's notice by %q = %v, want ok %v", tt.target, tt.actor, err, tt.ok)
		}
		if !tt.ok && !isCode(err, gateway.CodePermission) {
			t.Errorf("ack of %q's notice by %q = %v, want %s", tt.target, tt.actor, err, gateway.CodePermission)
		}
	}

	claims := []struct {
		to, actor string
		ok        bool
	}{
		{"SAM", "sam", true},
		{"ſam", "sam", false},
		{"@SUPPORT", "bob", true},
		{"@ſupport", "bob", false},
	}
	for _, tt := range claims {
		ev := msg("CHATGPT", tt.to)
		_, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionClaim, Group: "g", EventID: ev.ID, Actor: tt.actor})
		if ok := err == nil; ok != tt.ok {
			t.Errorf("claim of a request to %q by %q = %v, want ok %v", tt.to, tt.actor, err, tt.ok)
		}
	}
}
