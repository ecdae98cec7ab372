package attention

import (
	"reflect"
	"testing"
	"time"
)

// claimStep is one request in a claim race, decided against the claims left
// by the steps before it (the relay applies decisions one at a time).
type claimStep struct {
	name        string
	at          time.Duration
	req         ClaimRequest
	seen        map[string]time.Duration // LastSeen updates before the step
	want        ClaimOutcome
	wantHolder  string
	wantExpires time.Duration // checked when non-zero
	wantPrev    string        // holder of Previous, "" for none
	wantPrevL   Liveness
}

func runClaims(t *testing.T, steps []claimStep) []Claim {
	t.Helper()
	st := State{LastSeen: map[string]time.Time{}}
	for _, s := range steps {
		for a, at := range s.seen {
			st.LastSeen[a] = t0.Add(at)
		}
		now := t0.Add(s.at)
		d := DecideClaim(st, s.req, now)
		if d.Outcome != s.want || d.Claim.Holder != s.wantHolder {
			t.Errorf("%s: DecideClaim(%+v) at +%v = %s held by %q, want %s held by %q",
				s.name, s.req, s.at, d.Outcome, d.Claim.Holder, s.want, s.wantHolder)
		}
		if s.wantExpires != 0 && !d.Claim.ExpiresAt.Equal(t0.Add(s.wantExpires)) {
			t.Errorf("%s: DecideClaim(%+v).Claim.ExpiresAt = +%v, want +%v", s.name, s.req, d.Claim.ExpiresAt.Sub(t0), s.wantExpires)
		}
		if d.Previous.Holder != s.wantPrev || d.PreviousLiveness != s.wantPrevL {
			t.Errorf("%s: DecideClaim(%+v).Previous = %q (%s), want %q (%s)",
				s.name, s.req, d.Previous.Holder, d.PreviousLiveness, s.wantPrev, s.wantPrevL)
		}
		st.Claims = ApplyClaim(st.Claims, d)
	}
	return st.Claims
}

// TestClaimRaces expresses docs/design.md §5.4 / C2A "Coordination And Claims" /
// Beadboard §4.4 as sequences of decisions.
func TestClaimRaces(t *testing.T) {
	m := time.Minute
	e := func(a string) ClaimRequest { return ClaimRequest{Agent: a, Event: "E1", Thread: "T1"} }
	long := func(a string, takeover bool) ClaimRequest {
		return ClaimRequest{Agent: a, Event: "E1", TTL: 2 * time.Hour, TakeoverStale: takeover}
	}
	t.Run("first claim wins, holder renews, expiry frees", func(t *testing.T) {
		claims := runClaims(t, []claimStep{
			{name: "A claims", at: 0, req: e("A"), want: ClaimGranted, wantHolder: "A", wantExpires: 10 * m},
			{name: "B same instant", at: 0, req: e("B"), want: ClaimDenied, wantHolder: "A"},
			{name: "A renews", at: 5 * m, req: e("A"), want: ClaimRenewed, wantHolder: "A", wantExpires: 15 * m},
			{name: "B just before expiry", at: 15*m - time.Nanosecond, req: e("B"), want: ClaimDenied, wantHolder: "A"},
			{name: "B at expiry", at: 15 * m, req: e("B"), want: ClaimGranted, wantHolder: "B", wantExpires: 25 * m,
				wantPrev: "A", wantPrevL: Active},
			{name: "A again", at: 16 * m, req: e("A"), want: ClaimDenied, wantHolder: "B"},
		})
		if len(claims) != 1 || claims[0].Holder != "B" {
			t.Errorf("claims after race = %+v, want B's claim only", claims)
		}
	})
	t.Run("renewal keeps ClaimedAt", func(t *testing.T) {
		claims := runClaims(t, []claimStep{
			{name: "A claims", at: 0, req: e("A"), want: ClaimGranted, wantHolder: "A"},
			{name: "A renews with TTL", at: m, req: ClaimRequest{Agent: "A", Event: "E1", TTL: m}, want: ClaimRenewed, wantHolder: "A",
				wantExpires: 2 * m},
		})
		if !claims[0].ClaimedAt.Equal(t0) || !claims[0].RenewedAt.Equal(t0.Add(m)) {
			t.Errorf("renewed claim = %+v, want ClaimedAt +0, RenewedAt +1m", claims[0])
		}
	})
	t.Run("stale holder taken over only on request", func(t *testing.T) {
		runClaims(t, []claimStep{
			{name: "A claims 2h", at: 0, req: long("A", false), seen: map[string]time.Duration{"A": 0}, want: ClaimGranted, wantHolder: "A"},
			{name: "B while A active", at: 15*m - time.Nanosecond, req: long("B", true), want: ClaimDenied, wantHolder: "A"},
			{name: "B without takeover", at: 15 * m, req: long("B", false), want: ClaimDenied, wantHolder: "A"},
			{name: "B with takeover", at: 15 * m, req: long("B", true), want: ClaimTakenOver, wantHolder: "B",
				wantPrev: "A", wantPrevL: Stale},
			{name: "A comes back", at: 16 * m, req: long("A", false), seen: map[string]time.Duration{"A": 16 * m},
				want: ClaimDenied, wantHolder: "B"},
		})
	})
	t.Run("activity keeps a long claim", func(t *testing.T) {
		runClaims(t, []claimStep{
			{name: "A claims 2h", at: 0, req: long("A", false), want: ClaimGranted, wantHolder: "A"},
			{name: "B at 30m, A seen at 20m", at: 30 * m, req: long("B", true), seen: map[string]time.Duration{"A": 20 * m},
				want: ClaimDenied, wantHolder: "A"},
		})
	})
	t.Run("evicted holder released", func(t *testing.T) {
		runClaims(t, []claimStep{
			{name: "A claims 2h", at: 0, req: long("A", false), want: ClaimGranted, wantHolder: "A"},
			{name: "B at 30m", at: 30 * m, req: long("B", false), want: ClaimGranted, wantHolder: "B",
				wantPrev: "A", wantPrevL: Evicted},
		})
	})
	t.Run("thread claim blocks event claims of others", func(t *testing.T) {
		claims := runClaims(t, []claimStep{
			{name: "A claims thread", at: 0, req: ClaimRequest{Agent: "A", Thread: "T1"}, want: ClaimGranted, wantHolder: "A"},
			{name: "B claims thread", at: 0, req: ClaimRequest{Agent: "B", Thread: "T1"}, want: ClaimDenied, wantHolder: "A"},
			{name: "B claims event in thread", at: m, req: e("B"), want: ClaimDenied, wantHolder: "A"},
			{name: "B claims event elsewhere", at: m, req: ClaimRequest{Agent: "B", Event: "E2", Thread: "T2"}, want: ClaimGranted, wantHolder: "B"},
			{name: "A claims event in own thread", at: m, req: e("A"), want: ClaimGranted, wantHolder: "A"},
		})
		st := State{Claims: claims}
		if c, ok := ClaimHolder(st, "E1", "T1", t0.Add(m)); !ok || c.Holder != "A" || c.Event != "E1" {
			t.Errorf("ClaimHolder(E1, T1) = %+v, %v, want A's event claim", c, ok)
		}
		if c, ok := ClaimHolder(st, "E9", "T1", t0.Add(m)); !ok || c.Holder != "A" || c.Event != "" {
			t.Errorf("ClaimHolder(E9, T1) = %+v, %v, want A's thread claim", c, ok)
		}
		if c, ok := ClaimHolder(st, "E9", "T9", t0.Add(m)); ok {
			t.Errorf("ClaimHolder(E9, T9) = %+v, true, want none", c)
		}
	})
	t.Run("invalid requests", func(t *testing.T) {
		runClaims(t, []claimStep{
			{name: "no agent", req: ClaimRequest{Event: "E1"}, want: ClaimInvalid},
			{name: "no subject", req: ClaimRequest{Agent: "A"}, want: ClaimInvalid},
		})
	})
}

// TestRoleEventOneClaimant: a role event goes to at most one claimant
// (docs/design.md §5.4; C2A "the host SHOULD select one responder or require a
// successful claim").
func TestRoleEventOneClaimant(t *testing.T) {
	agents := []Agent{
		{ID: "A", Roles: []string{"backend"}},
		{ID: "B", Roles: []string{"backend"}},
		{ID: "C", Roles: []string{"backend"}},
	}
	e := ev(IntentRequest, "@backend").with(func(e *Event) { e.ID = "E1"; e.Thread = "T1" })
	st := State{}
	count := func(now time.Time) (may int, holder string) {
		for _, a := range agents {
			d := Decide(e, a, st, now)
			if d.Policy == MayRespond || d.Policy == MustRespond {
				may++
				holder = a.ID
			}
		}
		return may, holder
	}
	// C2A "may_respond after claim": before a claim every holder of the
	// role may respond, by claiming first; the first claim wins.
	if n, _ := count(t0); n != len(agents) {
		t.Errorf("before any claim, %d agents may respond, want %d", n, len(agents))
	}
	for _, a := range []string{"B", "A", "C"} { // B's request is applied first
		st.Claims = ApplyClaim(st.Claims, DecideClaim(st, ClaimRequest{Agent: a, Event: "E1", Thread: "T1"}, t0))
	}
	if n, h := count(t0); n != 1 || h != "B" {
		t.Errorf("after B, A, C claim: %d agents may respond (last %s), want exactly B", n, h)
	}
	for _, a := range agents {
		d := Decide(e, a, st, t0)
		want := ToolMailbox
		if a.ID == "B" {
			want = Buffered
		}
		if d.Injection != want {
			t.Errorf("Decide(%s, %s).Injection = %s, want %s", describe(e), a.ID, d.Injection, want)
		}
	}
	if n, _ := count(t0.Add(DefaultClaimTTL)); n != len(agents) {
		t.Errorf("after the claim expired, %d agents may respond, want %d (claim again)", n, len(agents))
	}
}

func TestApplyReleasePrune(t *testing.T) {
	orig := []Claim{
		{Event: "E1", Holder: "A", ClaimedAt: t0, ExpiresAt: t0.Add(time.Minute)},
		{Thread: "T1", Holder: "B", ClaimedAt: t0, ExpiresAt: t0.Add(time.Hour)},
	}
	snapshot := append([]Claim(nil), orig...)
	d := DecideClaim(State{Claims: orig}, ClaimRequest{Agent: "A", Event: "E1"}, t0.Add(30*time.Second))
	next := ApplyClaim(orig, d)
	if !reflect.DeepEqual(orig, snapshot) {
		t.Errorf("ApplyClaim modified its input: %+v", orig)
	}
	if len(next) != 2 || next[1].Holder != "A" || !next[1].ExpiresAt.Equal(t0.Add(30*time.Second+DefaultClaimTTL)) {
		t.Errorf("ApplyClaim(renewal) = %+v, want B's thread claim and A's renewed claim", next)
	}
	if same := ApplyClaim(orig, ClaimDecision{Outcome: ClaimDenied, Claim: orig[0]}); !reflect.DeepEqual(same, orig) {
		t.Errorf("ApplyClaim(denied) = %+v, want unchanged", same)
	}

	if out, ok := ReleaseClaim(orig, "B", "E1", ""); ok || len(out) != 2 {
		t.Errorf("ReleaseClaim(B, E1) = %+v, %v, want unchanged, false (not B's)", out, ok)
	}
	if out, ok := ReleaseClaim(orig, "B", "", "T1"); !ok || len(out) != 1 || out[0].Holder != "A" {
		t.Errorf("ReleaseClaim(B, T1) = %+v, %v, want A's claim only, true", out, ok)
	}

	st := State{Claims: orig, LastSeen: map[string]time.Time{"B": t0}}
	kept, released := PruneClaims(st, t0.Add(time.Minute))
	if len(kept) != 1 || kept[0].Holder != "B" || len(released) != 1 || released[0].Holder != "A" {
		t.Errorf("PruneClaims(+1m) = %+v, %+v, want B kept, A released (expired)", kept, released)
	}
	kept, released = PruneClaims(st, t0.Add(EvictAfter))
	if len(kept) != 0 || len(released) != 2 {
		t.Errorf("PruneClaims(+30m) = %+v, %+v, want both released (A expired, B evicted)", kept, released)
	}
}

// TestLivenessBoundaries checks Beadboard §4.3 at exactly 15 and 30 min.
func TestLivenessBoundaries(t *testing.T) {
	tests := []struct {
		age  time.Duration
		want Liveness
	}{
		{-time.Hour, Active}, // last seen in the future: clock skew
		{0, Active},
		{15*time.Minute - time.Nanosecond, Active},
		{15 * time.Minute, Stale},
		{30*time.Minute - time.Nanosecond, Stale},
		{30 * time.Minute, Evicted},
		{24 * time.Hour, Evicted},
	}
	for _, tt := range tests {
		if g := LivenessOf(t0, t0.Add(tt.age)); g != tt.want {
			t.Errorf("LivenessOf(t, t+%v) = %s, want %s", tt.age, g, tt.want)
		}
	}
	if g := LivenessOf(time.Time{}, t0); g != Evicted {
		t.Errorf("LivenessOf(zero, now) = %s, want evicted", g)
	}
	custom := []struct {
		stale, age time.Duration
		want       Liveness
	}{
		{5 * time.Minute, 4 * time.Minute, Active},
		{5 * time.Minute, 5 * time.Minute, Stale},
		{5 * time.Minute, 10 * time.Minute, Evicted},
		{0, 15 * time.Minute, Stale},
		{-time.Minute, 29 * time.Minute, Stale},
	}
	for _, tt := range custom {
		if g := LivenessAfter(t0, t0.Add(tt.age), tt.stale); g != tt.want {
			t.Errorf("LivenessAfter(t, t+%v, %v) = %s, want %s", tt.age, tt.stale, g, tt.want)
		}
	}
}

func TestClaimable(t *testing.T) {
	other := State{Claims: []Claim{{Thread: "T1", Holder: "codex", ClaimedAt: t0, ExpiresAt: t0.Add(time.Hour)}}, Threads: []string{"T1"}}
	tests := []struct {
		name string
		ev   Event
		st   State
		want bool
	}{
		{"role request", ev(IntentRequest, "@backend"), State{}, true},
		{"role request claimed by other", ev(IntentRequest, "@backend").with(func(e *Event) { e.Thread = "T1" }), other, true},
		{"DM", ev(IntentRequest, "claude"), State{}, true},
		{"participating thread", ev(IntentRespond, "chatgpt").with(func(e *Event) { e.Thread = "T1" }), State{Threads: []string{"T1"}}, true},
		{"to other", ev(IntentRequest, "chatgpt"), State{}, false},
		{"ambient", ev(IntentRequest), State{}, false},
		{"broadcast", ev(IntentBroadcast, "@backend"), State{}, false},
		{"ACK to me", ev(IntentACK, "claude"), State{}, false},
		{"CLOSE to role", ev(IntentClose, "@backend"), State{}, false},
		{"own", ev(IntentRequest, "@backend").with(func(e *Event) { e.From = "claude" }), State{}, false},
	}
	for _, tt := range tests {
		if g := Claimable(tt.ev, me, tt.st, t0); g != tt.want {
			t.Errorf("Claimable(%s) = %v, want %v", describe(tt.ev), g, tt.want)
		}
	}
	// A participant of a thread another agent claimed stays out of it.
	e := ev(IntentRespond, "chatgpt").with(func(e *Event) { e.Thread = "T1" })
	if g, w := got(Decide(e, me, other, t0)), (want{ToMyRole, MustNotRespond, ReasonClaimedByOther, ToolMailbox}); g != w {
		t.Errorf("Decide(%s) = %v, want %v", describe(e), g, w)
	}
}
