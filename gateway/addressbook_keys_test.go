package gateway_test

import (
	"errors"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
)

// TestAddressBookKeyIDs: the address book's key ids are read in NFC, as a
// signature's pkid= is, so a config written in NFD still names the key;
// and one holding a character a reader cannot see is refused, as in an
// envelope.
func TestAddressBookKeyIDs(t *testing.T) {
	book, err := gateway.NewAddressBook([]gateway.Agent{{ID: "claude", Keys: []string{"cafe\u0301@test"}}})
	if err != nil {
		t.Fatalf("NewAddressBook(NFD key id) = %v", err)
	}
	if owner, ok := book.KeyOwner("caf\u00e9@test"); !ok || owner != "claude" {
		t.Errorf("KeyOwner(NFC) = %q, %v; want claude", owner, ok)
	}
	for _, k := range []string{"claude\u200b@test", "claude@test\u202e", "clau\u00a0de@test"} {
		if _, err := gateway.NewAddressBook([]gateway.Agent{{ID: "claude", Keys: []string{k}}}); !errors.Is(err, envelope.ErrIdentifier) {
			t.Errorf("NewAddressBook(key %q) = %v, want ErrIdentifier", k, err)
		}
	}
}
