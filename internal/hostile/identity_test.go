package hostile

import (
	"net/http"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
)

// TestPostAsAnotherAgent: bob signs an envelope with a throwaway key and
// names ALICE as its sender. A valid signature by a key nobody is known to
// hold proves nothing: the relay refuses it, and nothing is recorded by
// alice.
func TestPostAsAnotherAgent(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	throwaway := genKey(t, "throwaway@evil.test")
	tests := []struct{ name, text string }{
		{"unsigned", envText("ALICE", "CAROL", "REQUEST", "g", "unsigned, as alice")},
		{"throwaway key", signed(t, envText("ALICE", "CAROL", "HANDOFF", "g", "signed by a throwaway key, as alice"), throwaway)},
		{"bob's own key id", signed(t, envText("ALICE", "CAROL", "HANDOFF", "g", "bob's key id, as alice"), genKey(t, bobKeyID))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := r.in(t)
			r.refused("bob", tt.text, http.StatusForbidden, "E-PERM")
		})
	}
	for _, ev := range r.events() {
		if ev.By == "alice" {
			t.Errorf("an event is recorded by alice: %s", ev.Kind)
		}
	}
	// The throwaway key was not pinned by a refused envelope.
	if _, ok := r.trustEntry("throwaway@evil.test"); ok {
		t.Errorf("a refused envelope pinned throwaway@evil.test")
	}
	// bob speaking as himself with the throwaway key is recorded by bob:
	// a signature by an unknown key proves nothing, but hurts nobody.
	res := r.accepted("bob", signed(t, envText("BOB", "CAROL", "REQUEST", "g", "as myself"), throwaway))
	if ev, _ := r.event(res.EventID); ev.By != "bob" {
		t.Errorf("bob's own envelope: by = %q, want bob", ev.By)
	}
}

// TestAckForAnotherAgent: alice owes an answer to a HANDOFF; bob sends an
// ACK envelope naming ALICE, signed with a throwaway key, to clear it.
// Nothing may be recorded for alice.
func TestAckForAnotherAgent(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	handoff := r.accepted("bob", envText("BOB", "ALICE", "HANDOFF", "g", "take over the release"))
	for _, intent := range []string{"ACK", "NACK"} {
		t.Run(intent, func(t *testing.T) {
			r := r.in(t)
			text := signed(t, envText("ALICE", "BOB", intent, "g", "done", withParent(handoff.Message)), genKey(t, "throwaway-"+strings.ToLower(intent)+"@evil.test"))
			r.refused("bob", text, http.StatusForbidden, "E-PERM")
		})
	}
	for _, ev := range r.events() {
		d, _ := gateway.ParseData(ev)
		if ev.Kind == gateway.KindAck || d.ActorID == "alice" {
			t.Errorf("recorded %s by %s for actor %q, want nothing acted for alice", ev.Kind, ev.By, d.ActorID)
		}
	}
	// alice's own ACK is hers.
	res := r.accepted("alice", envText("ALICE", "BOB", "ACK", "g", "done", withParent(handoff.Message)))
	if ev, d := r.event(res.EventID); ev.Kind != gateway.KindAck || ev.By != "alice" || d.ActorID != "alice" {
		t.Errorf("alice's ACK = %s by %s for %q, want chat.ack by alice for alice", ev.Kind, ev.By, d.ActorID)
	}
}

// TestForwardedSignedEnvelope: the forwarding case holds. Once alice's key
// is pinned by her own first use, bob may relay her signed envelope: it is
// recorded by alice, and the C2A delivery's author is alice too.
func TestForwardedSignedEnvelope(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	aliceKey := genKey(t, aliceKeyID)
	early := signed(t, envText("ALICE", "CAROL", "REQUEST", "fwd", "forwarded before alice's first use"), aliceKey)
	r.refused("bob", early, http.StatusForbidden, "E-PERM")
	if first := r.accepted("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "fwd", "first use"), aliceKey)); first.Status != gateway.StatusFirstUse {
		t.Fatalf("alice's first signed envelope: status %q, want first-use", first.Status)
	}
	fwd := r.accepted("bob", signed(t, envText("ALICE", "BOB", "REQUEST", "fwd", "forwarded by bob"), aliceKey))
	if fwd.Status != gateway.StatusVerified {
		t.Errorf("forwarded envelope: status %q, want verified", fwd.Status)
	}
	if ev, d := r.event(fwd.EventID); ev.By != "alice" || d.X.Sender != "alice" || d.X.Principal != "bob" {
		t.Errorf("forwarded envelope: by %q sender %q principal %q, want alice alice bob", ev.By, d.X.Sender, d.X.Principal)
	}
	a := r.do(http.MethodGet, "/v1/agents/bob/deliveries?group=fwd", "bob", nil, nil)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"from":"alice"`) {
		t.Errorf("bob's deliveries = %d %s, want the forwarded envelope from alice", a.status, a.body)
	}
}

// TestHijackKeyIDOnFirstUse: bob announces a throwaway key under the key
// id the address book assigns to alice. The relay must not pin it — or
// alice's real key would then be refused as key-changed.
func TestHijackKeyIDOnFirstUse(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	impostor := genKey(t, aliceKeyID)
	for _, from := range []string{"BOB", "ALICE"} {
		t.Run("as "+from, func(t *testing.T) {
			r := r.in(t)
			r.refused("bob", signed(t, envText(from, "CAROL", "REQUEST", "pin", "hijack alice's key id"), impostor), http.StatusForbidden, "E-PERM")
			if e, ok := r.trustEntry(aliceKeyID); ok {
				t.Fatalf("bob's envelope pinned %s to %s", aliceKeyID, e.Key.Fingerprint())
			}
		})
	}
	if !strings.Contains(r.logs.String(), "belongs to alice") {
		t.Errorf("the relay's log does not name the refusal (\"belongs to alice\")")
	}
	// alice's real key is pinned on her first use.
	aliceKey := genKey(t, aliceKeyID)
	if res := r.accepted("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "pin", "my real key"), aliceKey)); res.Status != gateway.StatusFirstUse {
		t.Errorf("alice's first signed envelope: status %q, want first-use", res.Status)
	}
	if e, ok := r.trustEntry(aliceKeyID); !ok || e.Sender != "alice" || !e.Key.Equal(aliceKey.Public()) {
		t.Errorf("trust entry for %s = %+v (%v), want alice's key first used by alice", aliceKeyID, e, ok)
	}
	// An unassigned key id is pinned on the first use of whoever speaks.
	bobSpare := genKey(t, "spare@hostile.test")
	if res := r.accepted("bob", signed(t, envText("BOB", "CAROL", "REQUEST", "pin", "a spare key"), bobSpare)); res.Status != gateway.StatusFirstUse {
		t.Errorf("bob's unassigned key: status %q, want first-use", res.Status)
	}
	// ... and then it speaks for bob only.
	r.refused("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "pin", "with bob's spare key"), bobSpare), http.StatusForbidden, "E-PERM")
}

// TestRevokeByNonOwner: bob sends REVOKE envelopes for alice's key id —
// unsigned, and signed by his own key. Neither changes the trust store
// nor records a key_revoked notice; only the owner's REVOKE does.
func TestRevokeByNonOwner(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	aliceKey := genKey(t, aliceKeyID)
	r.accepted("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "rv", "pin my key"), aliceKey))
	bobKey := genKey(t, bobKeyID)
	revoke := func(from string) string {
		return envText(from, "ALL", "REVOKE", "rv", "this key is compromised", withMeta("revoke", "Pkid", aliceKeyID))
	}
	tests := []struct{ name, principal, text string }{
		{"unsigned", "bob", revoke("BOB")},
		{"signed by bob's key", "bob", signed(t, revoke("BOB"), bobKey)},
		{"as alice, throwaway key", "bob", signed(t, revoke("ALICE"), genKey(t, "throwaway@evil.test"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := r.in(t)
			r.refused(tt.principal, tt.text, http.StatusForbidden, "E-PERM")
			if e, _ := r.trustEntry(aliceKeyID); e.Revoked {
				t.Fatalf("bob's REVOKE revoked alice's key")
			}
		})
	}
	for _, ev := range r.events() {
		if d, _ := gateway.ParseData(ev); d.Kind == "key_revoked" {
			t.Errorf("a refused REVOKE recorded %q", d.Title)
		}
	}
	if !strings.Contains(r.logs.String(), "revocation refused") {
		t.Errorf("the relay's log has no \"revocation refused\" line")
	}
	if res := r.accepted("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "rv", "still mine"), aliceKey)); res.Status != gateway.StatusVerified {
		t.Errorf("alice after the attempts: status %q, want verified", res.Status)
	}
	// The owner revokes her key by a REVOKE signed by it.
	res := r.accepted("alice", signed(t, revoke("ALICE"), aliceKey))
	if ev, d := r.event(res.EventID); d.Kind != "key_revoked" || ev.By != "alice" {
		t.Errorf("alice's REVOKE = %s %q by %s, want key_revoked by alice", ev.Kind, d.Kind, ev.By)
	}
	if e, _ := r.trustEntry(aliceKeyID); !e.Revoked {
		t.Errorf("alice's REVOKE did not revoke her key")
	}
	r.refused("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "rv", "after revocation"), aliceKey), http.StatusForbidden, "E-PERM")
}

// TestRevokeByAdmin: a principal named in admins may revoke any key id
// with a REVOKE envelope; the owner may revoke hers unsigned.
func TestRevokeByAdmin(t *testing.T) {
	r := startRelay(t, baseConfig(`admins = ["bob"]`))
	r.accepted("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "rv", "pin my key"), genKey(t, aliceKeyID)))
	r.accepted("bob", envText("BOB", "ALL", "REVOKE", "rv", "revoked by the admin", withMeta("revoke", "Pkid", aliceKeyID)))
	if e, _ := r.trustEntry(aliceKeyID); !e.Revoked {
		t.Errorf("the admin's REVOKE did not revoke alice's key")
	}
}

// TestRevokeOwnUnsigned: a principal who is not an admin may revoke its
// own key id with an unsigned REVOKE (it holds the token the key was
// pinned under), and only its own.
func TestRevokeOwnUnsigned(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	r.accepted("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "rv", "pin"), genKey(t, aliceKeyID)))
	r.accepted("bob", signed(t, envText("BOB", "CAROL", "REQUEST", "rv", "pin"), genKey(t, bobKeyID)))
	r.refused("bob", envText("BOB", "ALL", "REVOKE", "rv", "alice's key, unsigned", withMeta("revoke", "Pkid", aliceKeyID)), http.StatusForbidden, "E-PERM")
	if e, _ := r.trustEntry(aliceKeyID); e.Revoked {
		t.Errorf("bob, not an admin, revoked alice's key")
	}
	r.accepted("bob", envText("BOB", "ALL", "REVOKE", "rv", "my own key, unsigned", withMeta("revoke", "Pkid", bobKeyID)))
	if e, _ := r.trustEntry(bobKeyID); !e.Revoked {
		t.Errorf("bob's unsigned REVOKE of his own key did not revoke it")
	}
}

// TestRequireSignatures: with require_signatures, a first use counts only
// for a key id that is unassigned or the speaker's own; a throwaway key
// announced under another agent's key id is refused.
func TestRequireSignatures(t *testing.T) {
	r := startRelay(t, baseConfig(`require_signatures = true`))
	r.refused("bob", envText("BOB", "CAROL", "REQUEST", "req", "unsigned"), http.StatusForbidden, "E-PERM")
	r.refused("bob", signed(t, envText("BOB", "CAROL", "REQUEST", "req", "alice's key id"), genKey(t, aliceKeyID)), http.StatusForbidden, "E-PERM")
	r.refused("bob", signed(t, envText("ALICE", "CAROL", "REQUEST", "req", "as alice"), genKey(t, "throwaway@evil.test")), http.StatusForbidden, "E-PERM")
	if res := r.accepted("bob", signed(t, envText("BOB", "CAROL", "REQUEST", "req", "own key id"), genKey(t, bobKeyID))); res.Status != gateway.StatusFirstUse {
		t.Errorf("bob's own key id: status %q, want first-use", res.Status)
	}
	if res := r.accepted("alice", signed(t, envText("ALICE", "CAROL", "REQUEST", "req", "unassigned key id"), genKey(t, "alice-spare@hostile.test"))); res.Status != gateway.StatusFirstUse {
		t.Errorf("alice's unassigned key id: status %q, want first-use", res.Status)
	}
}
