package gateway

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

// Agent is one entry of the address book: an actor the relay knows, the
// envelope addresses that name it, its roles, the key ids it signs with,
// and where envelopes for it go.
type Agent struct {
	// ID is the actor id used in the ledger (CCCS §3.3): "claude", "peer-1".
	ID string
	// Names are the envelope addresses that mean this actor, matched
	// without regard to case: "CLAUDE", "claude://session/abc".
	Names []string
	// Roles the actor holds; a receiver "@reviewer" or "reviewer" reaches
	// every actor with role "reviewer".
	Roles []string
	// Keys are the signing key ids (pkid) this actor owns. An envelope
	// that verifies under one of them may name this actor as its sender,
	// whoever forwards it; no one else's first use pins them
	// (docs/security.md).
	Keys []string
	// Transport and Address say where the relay delivers envelopes for
	// this actor ("http" + URL, "mail" + address, "folder" + name,
	// "clipboard"); empty means the actor reads its inbox through the API.
	Transport string
	Address   string
	// Compat "v1.0" delivers envelopes to this actor in the v1.0 form
	// (envelope.ToV10: QUESTION/ANSWER, no META, a session line) for
	// readers that predate v1.1; empty or "v1.1" delivers them as received.
	Compat string
	// A2A opts the actor in to the A2A bridge (package gateway/a2a): the
	// relay then serves an A2A agent card and endpoint for it, and A2A
	// messages sent there become envelopes to it.
	A2A bool
	// Buffer, when set, makes the relay merge this agent's buffered
	// deliveries (C2A "buffered"): consecutive fragments from one sender
	// in one thread, less than Buffer.Quiet apart and within
	// Buffer.MaxWindow, reach it as one delivery (docs/agents.md,
	// "Buffered and digest delivery"). Nil delivers each event alone.
	Buffer *attention.Buffer
	// DigestEvery, when positive, makes the relay summarise this agent's
	// digest deliveries (C2A "digest": ambient BROADCAST traffic) in one
	// digest event per group every DigestEvery, instead of delivering
	// each. Zero delivers each event alone.
	DigestEvery time.Duration
}

// Bounds of the injection windows of an address book entry.
const (
	// MaxBufferWindow bounds Agent.Buffer's windows: a delivery is held
	// back at most this long.
	MaxBufferWindow = 10 * time.Minute
	// MinDigestEvery bounds Agent.DigestEvery from below: each digest is
	// a ledger event per group, kept for good.
	MinDigestEvery = time.Minute
)

// CompatV10 is the Agent.Compat value for v1.0 readers.
const CompatV10 = "v1.0"

// AddressBook maps envelope addresses and key ids to actors (docs/design.md §5.2).
// The zero value is an empty book in which every simple name is its own
// actor. It is read-only after construction and safe for concurrent use.
type AddressBook struct {
	agents []Agent
	byName map[string]int
	byKey  map[string]int
	byID   map[string]int
}

// foldKey is s case-folded as strings.EqualFold compares, by which the
// relay tells actors apart: each rune becomes the least of its Unicode
// simple-folding orbit, so "ſam" (long s) keys as "sam" and "µ" (micro
// sign) as "μ" (Greek mu), where strings.ToLower keeps them apart.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		return m
	}, s)
}

// NewAddressBook builds a book from agents. It reports duplicate ids, names
// or keys, naming the entry.
func NewAddressBook(agents []Agent) (*AddressBook, error) {
	b := &AddressBook{byName: map[string]int{}, byKey: map[string]int{}, byID: map[string]int{}}
	agents = append([]Agent(nil), agents...)
	for i := range agents {
		a := &agents[i]
		if a.ID == "" {
			return nil, fmt.Errorf("gateway: address book entry %d has no id", i+1)
		}
		// Ids and names are compared in NFC, as envelopes are read
		// (envelope.NormalizeIdentifier); one a reader cannot see whole
		// is refused here as in an envelope.
		var err error
		if a.ID, err = envelope.NormalizeIdentifier(a.ID); err != nil {
			return nil, fmt.Errorf("gateway: address book entry %d: id: %w", i+1, err)
		}
		a.Names = append([]string(nil), a.Names...)
		for j := range a.Names {
			if a.Names[j], err = envelope.NormalizeIdentifier(a.Names[j]); err != nil {
				return nil, fmt.Errorf("gateway: address book: agent %q: name: %w", a.ID, err)
			}
		}
		// Key ids too: a signature's pkid= is read in NFC (signing), so
		// an NFD key id here would never match one, and one a reader
		// cannot see whole would show as another's.
		a.Keys = append([]string(nil), a.Keys...)
		for j := range a.Keys {
			if a.Keys[j], err = envelope.NormalizeIdentifier(a.Keys[j]); err != nil {
				return nil, fmt.Errorf("gateway: address book: agent %q: key: %w", a.ID, err)
			}
		}
		if _, dup := b.byID[foldKey(a.ID)]; dup {
			return nil, fmt.Errorf("gateway: address book: duplicate agent id %q", a.ID)
		}
		switch a.Compat {
		case "", "v1.1", CompatV10:
		default:
			return nil, fmt.Errorf("gateway: address book: agent %q: compat %q is not v1.0 or v1.1", a.ID, a.Compat)
		}
		if err := checkInjection(*a); err != nil {
			return nil, err
		}
		if a.Buffer != nil {
			buf := *a.Buffer
			a.Buffer = &buf // the book is read-only: not the caller's copy
		}
		b.byID[foldKey(a.ID)] = i
		for _, n := range append([]string{a.ID}, a.Names...) {
			k := foldKey(n)
			if j, dup := b.byName[k]; dup && j != i {
				return nil, fmt.Errorf("gateway: address book: name %q belongs to both %q and %q", n, agents[j].ID, a.ID)
			}
			b.byName[k] = i
		}
		for _, k := range a.Keys {
			if j, dup := b.byKey[k]; dup && j != i {
				return nil, fmt.Errorf("gateway: address book: key %q belongs to both %q and %q", k, agents[j].ID, a.ID)
			}
			b.byKey[k] = i
		}
	}
	b.agents = agents
	return b, nil
}

// checkInjection checks a's buffering and digest windows.
func checkInjection(a Agent) error {
	if b := a.Buffer; b != nil {
		switch {
		case b.Quiet < 0 || b.MaxWindow < 0:
			return fmt.Errorf("gateway: address book: agent %q: buffer windows must not be negative", a.ID)
		case b.Quiet > MaxBufferWindow || b.MaxWindow > MaxBufferWindow:
			return fmt.Errorf("gateway: address book: agent %q: buffer windows must be at most %s", a.ID, MaxBufferWindow)
		case b.Quiet > 0 && b.MaxWindow > 0 && b.Quiet > b.MaxWindow:
			return fmt.Errorf("gateway: address book: agent %q: buffer quiet %s exceeds its window %s", a.ID, b.Quiet, b.MaxWindow)
		}
	}
	if a.DigestEvery != 0 && a.DigestEvery < MinDigestEvery {
		return fmt.Errorf("gateway: address book: agent %q: digest interval %s is under %s", a.ID, a.DigestEvery, MinDigestEvery)
	}
	return nil
}

// ActorID returns the actor id for an envelope address: the address book
// entry that names it, or else the address itself, lower-cased when it is a
// simple name ("CLAUDE" → "claude") so that the same assistant is one actor
// however a chat spells it.
func (b *AddressBook) ActorID(addr string) string {
	if n, err := envelope.NormalizeIdentifier(addr); err == nil {
		addr = n
	}
	if b != nil {
		if i, ok := b.byName[foldKey(addr)]; ok {
			return b.agents[i].ID
		}
	}
	if a, err := envelope.ParseAddress(addr); err == nil && a.Kind == envelope.AddressName {
		return strings.ToLower(addr)
	}
	return addr
}

// KeyOwner returns the actor that owns key id pkid, if the book says.
func (b *AddressBook) KeyOwner(pkid string) (string, bool) {
	if b == nil {
		return "", false
	}
	i, ok := b.byKey[pkid]
	if !ok {
		return "", false
	}
	return b.agents[i].ID, true
}

// Agent returns the entry for an actor id, matched without regard to case.
func (b *AddressBook) Agent(id string) (Agent, bool) {
	if b == nil {
		return Agent{}, false
	}
	i, ok := b.byID[foldKey(id)]
	if !ok {
		if i, ok = b.byName[foldKey(id)]; !ok {
			return Agent{}, false
		}
	}
	return b.agents[i], true
}

// Agents returns every entry, ordered by id.
func (b *AddressBook) Agents() []Agent {
	if b == nil {
		return nil
	}
	out := append([]Agent(nil), b.agents...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Recipients turns an envelope receiver into CCCS recipient tokens
// (CCCS §5.1): nil for a broadcast (ALL, *, @all), the selector itself for
// "@role", or the receiver's actor id.
func (b *AddressBook) Recipients(to string) []string {
	switch {
	case envelope.IsBroadcast(to):
		return nil
	case strings.HasPrefix(to, "@"):
		return []string{strings.ToLower(to)}
	}
	return []string{b.ActorID(to)}
}
