package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/liveness"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
	"github.com/crosstalk-go/crosstalk/signing"
)

// Verification statuses (docs/design.md §4.3). A Verifier returns one of them.
// They are package signing's statuses, defined there, as the strings the
// ledger records.
const (
	StatusUnsigned     = string(signing.StatusUnsigned)
	StatusVerified     = string(signing.StatusVerified)
	StatusFirstUse     = string(signing.StatusFirstUse)
	StatusKeyChanged   = string(signing.StatusKeyChanged)
	StatusBadSignature = string(signing.StatusBadSignature)
	StatusUnknownKey   = string(signing.StatusUnknownKey)
	StatusRevoked      = string(signing.StatusRevoked)
)

// Verification is the outcome of checking one envelope's signature.
type Verification struct {
	Status string // one of the Status constants
	Pkid   string // key id named by the signature, if any
	Alg    string // "ed25519" or "secp256r1", if signed
	Err    error  // why a signature did not verify, for the ERROR envelope
	// Key is the key the signature verified under, if any; for a pending
	// first use, the key the envelope announces.
	Key *signing.PublicKey `json:"-"`
	// Pending marks a key a TrustKeeper has not pinned yet (a first use,
	// or a key found in DNS): the relay pins it only when its rules allow
	// (docs/security.md).
	Pending bool

	source signing.KeySource // where a pending key came from
}

// Verifier checks the signature of an envelope read from text against the
// relay's trust store. Package signing provides the real one; cmd wires it.
type Verifier interface {
	Verify(ctx context.Context, env *envelope.Envelope) Verification
}

// VerifierFunc adapts a function to Verifier.
type VerifierFunc func(ctx context.Context, env *envelope.Envelope) Verification

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, env *envelope.Envelope) Verification {
	return f(ctx, env)
}

// Options configure a Relay. The zero value, or nil, is a relay with an
// empty address book that does not check signatures.
type Options struct {
	// Logger receives the relay's logs; nil discards them. Bodies are never
	// logged. The relay adds component=relay to its lines, and its parts
	// their own component (outbound, liveness, returns).
	Logger *slog.Logger
	// Book maps addresses, keys and roles to actors.
	Book *AddressBook
	// Verifier checks signatures; nil records every envelope as unsigned
	// or, if it carries a signature, unknown-key. A TrustKeeper (such as
	// NewTrustVerifier) leaves pins and revocations to the relay's rules;
	// any other Verifier changes its trust store as it pleases.
	Verifier Verifier
	// Admins are the token principals that may revoke any key with a
	// REVOKE envelope (docs/security.md); matched without regard to case.
	Admins []string
	// Groups maps an envelope's context to a ledger group; a context not in
	// the map is its own group, and an empty context is DefaultGroup.
	Groups map[string]string
	// RequireSignature rejects (E-PERM) envelopes that are not verified,
	// or first-use of a key id that is unassigned or the speaker's own.
	RequireSignature bool
	// Name is the sender of the relay's own envelopes (receipts, errors);
	// "SYSTEM" when empty, as in the spec's HTTP binding.
	Name string
	// ClaimTTL is how long a claim lasts; DefaultClaimTTL when zero.
	ClaimTTL time.Duration
	// StaleAfter is the liveness stale threshold, eviction at twice it
	// (BeadBoard §4.1; config [liveness] stale_after);
	// attention.StaleAfter when zero.
	StaleAfter time.Duration
	// MaxIntake bounds the bytes of one intake (an HTTP body, a file, a
	// mail); a larger one is recorded as one E-TOO-LARGE rejection.
	// MaxIntake (the constant) when zero.
	MaxIntake int
	// MaxEnvelopes bounds the envelopes of one intake; an intake with
	// more is refused whole (ErrTooManyEnvelopes). DefaultMaxEnvelopes
	// when zero.
	MaxEnvelopes int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Observer is told about intakes and deliveries (metrics); nil is none.
	Observer Observer
	// Projection holds the relay's projections of the ledger
	// (docs/scaling.md "Projections"), caught up from its high-water
	// mark on first use; nil keeps them in memory, rebuilt from the
	// whole ledger on first use. The caller closes it, after the relay.
	Projection *projection.DB
}

// DefaultGroup is the group of envelopes without a context.
const DefaultGroup = "default"

// DefaultClaimTTL is C2A's default claim lifetime (docs/design.md §5.4).
const DefaultClaimTTL = 10 * time.Minute

// MaxIntake is the default bound of one intake (an HTTP body, a mail, a
// file; Options.MaxIntake): several envelopes of up to
// envelope.MaxEnvelopeSize each plus chat text.
const MaxIntake = 8 << 20

// MaxPollTargets bounds the receivers one POLL names in `meta: poll`
// `Targets:` (docs/format.md §12): each is a recipient the relay decides
// attention for and a participant of the thread, and a line of 64 KiB
// could name ten thousand.
const MaxPollTargets = 256

// DefaultMaxEnvelopes is the default of Options.MaxEnvelopes.
const DefaultMaxEnvelopes = 1000

// Relay is the relay core. It is safe for concurrent use.
type Relay struct {
	store projectingStore
	log   *slog.Logger
	// logBase is Options.Logger: the relay's parts name their own
	// component on it (component), not beside log's.
	logBase  *slog.Logger
	book     *AddressBook
	verifier Verifier
	keeper   TrustKeeper // verifier, when it leaves pins to the relay
	admins   map[string]bool
	groups   map[string]string
	require  bool
	name     string
	claimTTL time.Duration
	maxEnvs  int
	maxBytes int
	now      func() time.Time
	obs      Observer

	live *liveness.Tracker // sightings, transitions in the ledger

	mu       sync.Mutex
	trackers map[string]*trackerState // see resumeTracker
	digests  map[string]digestMark    // see WriteDigests
	resume   map[string]resumePoint   // by agent, see AgentResume
	work     chan struct{}            // see StreamWork

	projMu      sync.Mutex // serialises SyncProjection
	proj        *projection.DB
	projChecked bool          // its high-water mark was checked against the ledger
	projPos     int64         // the log position proj has applied up to
	projAt      atomic.Int64  // when the write path last synced (see syncAfterWrite)
	projQ       projQueue     // facts of appends not yet applied
	projEvery   time.Duration // least time between two syncs on the write path
	projLogs    atomic.Int64  // how many times a sync read the log
	projQuiet   bool          // Quiesce was called: appends start no sync (projMu)

	data *dataCache // decoded data of the events trackers decided last

	protoMu    sync.Mutex                 // serialises OpenProtocol
	outbound   atomic.Pointer[outbound]   // the running dispatcher (RunOutbound), for tests
	protoWalks map[string]*obligationWalk // per group, see OpenProtocol
}

// New returns a relay that records into store.
func New(store ledger.Store, opts *Options) *Relay {
	if opts == nil {
		opts = &Options{}
	}
	r := &Relay{
		proj:      opts.Projection,
		projEvery: projEvery,
		data:      newDataCache(),
		logBase:   opts.Logger,
		book:      opts.Book,
		verifier:  opts.Verifier,
		groups:    normalizeGroups(opts.Groups),
		require:   opts.RequireSignature,
		name:      opts.Name,
		claimTTL:  opts.ClaimTTL,
		maxEnvs:   opts.MaxEnvelopes,
		maxBytes:  opts.MaxIntake,
		now:       opts.Now,
		obs:       opts.Observer,
		trackers:  map[string]*trackerState{},
		digests:   map[string]digestMark{},
		resume:    map[string]resumePoint{},
		work:      make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1)),
		admins:    map[string]bool{},
	}
	r.store = projectingStore{Store: store, r: r}
	r.keeper, _ = opts.Verifier.(TrustKeeper)
	for _, a := range opts.Admins {
		r.admins[strings.ToLower(a)] = true
	}
	if r.logBase == nil {
		r.logBase = slog.New(slog.DiscardHandler)
	}
	r.log = r.component("relay")
	if r.book == nil {
		r.book, _ = NewAddressBook(nil)
	}
	if r.name == "" {
		r.name = "SYSTEM"
	}
	if r.claimTTL <= 0 {
		r.claimTTL = DefaultClaimTTL
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.live = liveness.New(r.store, liveness.Options{Now: r.now, StaleAfter: opts.StaleAfter, Logger: r.component("liveness")})
	if r.maxEnvs <= 0 {
		r.maxEnvs = DefaultMaxEnvelopes
	}
	if r.maxBytes <= 0 {
		r.maxBytes = MaxIntake
	}
	return r
}

// Store returns the relay's ledger.
func (r *Relay) Store() ledger.Store { return r.store }

// SystemGroupPrefix begins the names of the ledger groups the relay keeps
// its own bookkeeping in (liveness, reservations: "x.crosstalk.liveness",
// "x.crosstalk.reservations"). No envelope may be recorded in one, and
// the group lists of the API and the web inbox leave them out.
const SystemGroupPrefix = "x.crosstalk."

// SystemGroup reports whether group is a bookkeeping group
// (SystemGroupPrefix), matched without regard to case.
func SystemGroup(group string) bool {
	return len(group) >= len(SystemGroupPrefix) && strings.EqualFold(group[:len(SystemGroupPrefix)], SystemGroupPrefix)
}

// Groups returns the ledger's conversation groups: every group but the
// bookkeeping ones (SystemGroup).
func (r *Relay) Groups(ctx context.Context) ([]ledger.Group, error) {
	gs, err := r.store.Groups(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(gs, func(g ledger.Group) bool { return SystemGroup(g.ID) }), nil
}

// Book returns the relay's address book.
func (r *Relay) Book() *AddressBook { return r.book }

// IntakeLimit returns the bound of one intake in bytes (Options.MaxIntake).
func (r *Relay) IntakeLimit() int { return r.maxBytes }

// Name returns the sender name of the relay's own envelopes.
func (r *Relay) Name() string { return r.name }

// Intake is one batch of text arriving on a transport.
type Intake struct {
	// Transport names the medium: "http", "api", "mail", "folder",
	// "clipboard".
	Transport string
	// Principal is the authenticated sender, "" when the transport has no
	// authentication. An authenticated principal may only send envelopes
	// as its own actor, unless they verify under a key that the address
	// book, or an earlier first use by that actor, assigns to the
	// header's sender (a forwarded, signed envelope; docs/security.md).
	Principal string
	// Source describes where the text came from for logs and the ledger
	// (a remote address, a file name, a mail's Message-ID).
	Source string
	// IdempotencyKey is the transport's own retry key, if any; it is
	// recorded with the events. Envelopes are idempotent by message id or
	// payload hash regardless.
	IdempotencyKey string
	// Data is the text; at most MaxIntake bytes are read.
	Data io.Reader
	// Text, when not nil, is the text already in memory, taken instead
	// of reading Data (an HTTP body the handler has read).
	Text []byte
}

// Outcome is what happened to one envelope of an intake.
type Outcome struct {
	// Envelope is the parsed envelope; nil when the text did not parse.
	Envelope *envelope.Envelope
	// Event is the ledger event: the envelope's event when accepted
	// (the first one, for a duplicate), the system.notify recording the
	// rejection otherwise.
	Event ledger.Event
	// Duplicate reports that the envelope was already in the ledger.
	Duplicate bool
	// Differs reports, for a duplicate, that the envelope recorded under
	// its message id says something else: another receiver, intent,
	// context, parent or body (sameContent). The recorded one stands
	// (docs/design.md §5.3); a change must be sent with a new message id.
	Differs bool
	// Verification is the signature check's result.
	Verification Verification
	// Actor is who speaks: the ledger's by, the author of the C2A
	// delivery, and whom an ACK, NACK or REVOKE acts for. Set when the
	// envelope is accepted.
	Actor string
	// Reject is set when the envelope was refused.
	Reject *Rejection
}

// Accepted reports whether the envelope was recorded (new or duplicate).
func (o Outcome) Accepted() bool { return o.Reject == nil }

// Rejection says why an envelope was refused.
type Rejection struct {
	Code   envelope.Code
	Reason string
	Line   int // input line of the problem, 0 when not about a line
}

// Error returns the code, the line if any, and the reason.
func (rj *Rejection) Error() string {
	if rj.Line > 0 {
		return fmt.Sprintf("%s: line %d: %s", rj.Code, rj.Line, rj.Reason)
	}
	return fmt.Sprintf("%s: %s", rj.Code, rj.Reason)
}

// ErrTooManyEnvelopes is returned by Ingest when the intake holds more
// envelopes than Options.MaxEnvelopes. Nothing of such an intake is
// checked or recorded: the sender must split it (envelope.CodeTooLarge).
var ErrTooManyEnvelopes = errors.New("gateway: too many envelopes in one intake")

// Ingest runs the pipeline for one intake and returns one outcome per
// envelope found, in order. Every outcome, accepted or rejected, is durable
// in the ledger when Ingest returns without error. An error means the
// ledger could not be written, and nothing may be acknowledged; an error
// wrapping ErrTooManyEnvelopes means the intake was refused whole and
// nothing was recorded.
func (r *Relay) Ingest(ctx context.Context, in Intake) (outs []Outcome, err error) {
	defer r.observeIngest(in.Transport, time.Now(), &outs, &err)
	data := in.Text
	if data == nil {
		if data, err = io.ReadAll(io.LimitReader(in.Data, int64(r.maxBytes)+1)); err != nil {
			return nil, fmt.Errorf("gateway: reading %s intake: %w", in.Transport, err)
		}
	}
	if len(data) > r.maxBytes {
		outs = []Outcome{{Reject: &Rejection{Code: envelope.CodeTooLarge, Reason: fmt.Sprintf("input larger than %d bytes", r.maxBytes)}}}
	} else {
		outs = readIntake(data, r.maxEnvs+1)
		if len(outs) > r.maxEnvs {
			return nil, fmt.Errorf("%w: more than %d in one %s intake; send them in smaller batches", ErrTooManyEnvelopes, r.maxEnvs, in.Transport)
		}
		for i := range outs {
			if outs[i].Reject == nil {
				outs[i] = r.checkEnvelope(ctx, in, outs[i].Envelope)
			}
		}
		if len(outs) == 0 {
			outs = []Outcome{{Reject: &Rejection{Code: envelope.CodeFormat, Reason: "no envelope found in the input"}}}
		}
	}
	recs := make([]ledger.Record, len(outs))
	parsed := make([]*EventData, len(outs))
	for i := range outs {
		recs[i], parsed[i] = r.record(ctx, in, &outs[i])
	}
	res, err := r.store.appendData(ctx, recs, parsed)
	if err != nil {
		return nil, fmt.Errorf("gateway: recording %s intake: %w", in.Transport, err)
	}
	for i := range outs {
		outs[i].Event, outs[i].Duplicate = res[i].Event, res[i].Duplicate
	}
	if err := r.checkDuplicates(ctx, in, outs); err != nil {
		return nil, err
	}
	if err := r.closeBlockers(ctx, outs); err != nil {
		return nil, err
	}
	for i := range outs {
		o := &outs[i]
		if o.Reject != nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "envelope rejected", slog.String("transport", in.Transport),
				slog.String("source", in.Source), slog.String("code", string(o.Reject.Code)), slog.String("reason", o.Reject.Reason))
		} else {
			r.log.LogAttrs(ctx, slog.LevelInfo, "envelope recorded", slog.String("transport", in.Transport),
				slog.String("message", o.Envelope.Message), slog.String("event", o.Event.ID), slog.String("group", o.Event.GroupID),
				slog.Int64("seq", o.Event.Seq), slog.Bool("duplicate", o.Duplicate), slog.String("verification", o.Verification.Status))
		}
	}
	return outs, nil
}

// checkDuplicates turns a "duplicate" whose first event came from another
// sender into an E-PERM rejection: a message id is the sender's, and an
// envelope must not be acknowledged as recorded when another actor's event
// holds its id (an id squatted first, or a forged retry). A duplicate from
// the same sender whose content differs from the recorded envelope is
// marked (Outcome.Differs), so that an edited resend is not taken for
// recorded.
func (r *Relay) checkDuplicates(ctx context.Context, in Intake, outs []Outcome) error {
	var recs []ledger.Record
	var idx []int
	for i := range outs {
		o := &outs[i]
		if !o.Duplicate || o.Envelope == nil {
			continue
		}
		d, err := ParseData(o.Event)
		if err != nil || d.X == nil {
			continue
		}
		if sender := o.Actor; d.X.Sender != sender { // actor ids, exactly: ſam is not sam
			o.Reject = &Rejection{Code: envelope.CodePerm, Line: o.Envelope.Line,
				Reason: fmt.Sprintf("message id %s is already recorded from %s, not %s", o.Envelope.Message, d.X.Sender, sender)}
			o.Duplicate = false
			rec, _ := r.rejectionRecord(in, o)
			recs = append(recs, rec)
			idx = append(idx, i)
		} else if d.X.Raw != "" && !sameContent(o.Envelope, d.X.Raw) {
			o.Differs = true
			r.log.LogAttrs(ctx, slog.LevelWarn, "envelope differs from the one recorded under its message id; the recorded one stands",
				slog.String("transport", in.Transport), slog.String("source", in.Source), slog.String("message", o.Envelope.Message),
				slog.String("event", o.Event.ID))
		}
	}
	if len(recs) == 0 {
		return nil
	}
	res, err := r.store.Append(ctx, recs)
	if err != nil {
		return fmt.Errorf("gateway: recording %s intake: %w", in.Transport, err)
	}
	for j, i := range idx {
		outs[i].Event = res[j].Event
	}
	return nil
}

// sameContent reports whether env says what the envelope recorded as raw
// says: the same sender, receiver, intent, context, parent and body, the
// body compared line by line without the blanks at the ends of lines
// (which chat UIs add and strip). What an honest retry changes is not
// compared: the session (composed anew), the user, the thread a relay
// assigned, the signature and key announcements. The sender is the same
// actor already (checkDuplicates). raw is read as the intake read it,
// leniently; a raw text that no longer parses counts as the same: nothing
// to tell the sender.
func sameContent(env *envelope.Envelope, raw string) bool {
	rec, err := envelope.NewBytesReader([]byte(raw)).Next()
	if err != nil {
		return true
	}
	return strings.EqualFold(env.To, rec.To) &&
		env.Intent == rec.Intent && env.Context == rec.Context && env.Parent == rec.Parent &&
		sameLines(env.Body, rec.Body)
}

// sameLines compares a and b line by line, ignoring blanks at the ends of
// lines and blank lines at the end.
func sameLines(a, b string) bool {
	a, b = strings.TrimRight(a, " \t\n"), strings.TrimRight(b, " \t\n")
	for a != "" || b != "" {
		var la, lb string
		la, a, _ = strings.Cut(a, "\n")
		lb, b, _ = strings.Cut(b, "\n")
		if strings.TrimRight(la, " \t") != strings.TrimRight(lb, " \t") {
			return false
		}
	}
	return true
}

// readIntake parses data into at most limit outcomes, one per envelope or
// syntax error, in order: an envelope not yet checked, or its rejection.
// The caller refuses an intake that reaches limit before any envelope is
// verified, so the envelope bound costs no work per envelope.
func readIntake(data []byte, limit int) []Outcome {
	rd := envelope.NewBytesReader(data)
	var outs []Outcome
	for len(outs) < limit {
		env, err := rd.Next()
		if err == io.EOF {
			break
		}
		var se *envelope.SyntaxError
		switch {
		case errors.As(err, &se):
			outs = append(outs, Outcome{Reject: &Rejection{Code: se.Code, Reason: se.Msg, Line: se.Line}})
		case err != nil: // cannot happen on a bytes reader; keep it loud
			return append(outs, Outcome{Reject: &Rejection{Code: envelope.CodeFormat, Reason: err.Error()}})
		default:
			outs = append(outs, Outcome{Envelope: env})
		}
	}
	return outs
}

func (r *Relay) checkEnvelope(ctx context.Context, in Intake, env *envelope.Envelope) Outcome {
	o := Outcome{Envelope: env}
	reject := func(code envelope.Code, format string, args ...any) Outcome {
		o.Reject = &Rejection{Code: code, Reason: fmt.Sprintf(format, args...), Line: env.Line}
		return o
	}
	if !env.Complete {
		return reject(envelope.CodeFormat, "envelope not terminated: missing [[END]]")
	}
	// POLL targets are receivers too (docs/format.md §12); the Reader
	// checked the header's.
	if targets, ok := env.MetaValue("poll", "Targets"); ok {
		if n := strings.Count(targets, ",") + 1; n > MaxPollTargets {
			return reject(envelope.CodeAddress, "poll names %d targets; at most %d", n, MaxPollTargets)
		}
		for _, t := range strings.Split(targets, ",") {
			if _, err := envelope.NormalizeIdentifier(strings.TrimSpace(t)); err != nil {
				return reject(envelope.CodeAddress, "poll target %v", err)
			}
		}
	}
	if err := r.checkObligation(env); err != nil {
		return reject(envelope.CodeFormat, "%v", err)
	}
	if err := checkProtocol(env); err != nil {
		return reject(envelope.CodeFormat, "%v", err)
	}
	if p, _ := protocolOf(env); p != nil && r.book.ActorID(env.From) == r.book.ActorID(env.To) {
		// It would oblige its author to acknowledge itself, then chase
		// the coordinator and a human about it (BeadBoard §6.2: to another agent).
		return reject(envelope.CodeFormat, "a %s goes to another agent, not to its author %s", p.EventType, env.From)
	}
	if reason := r.checkSource(ctx, env); reason != "" {
		return reject(envelope.CodeFormat, "%s", reason)
	}
	if g := r.Group(env.Context); SystemGroup(g) {
		return reject(envelope.CodeAddress, "context %q maps to group %q: groups beginning %q are the relay's own bookkeeping", env.Context, g, SystemGroupPrefix)
	}
	o.Verification = r.verify(ctx, env)
	v := &o.Verification
	switch v.Status {
	case StatusKeyChanged, StatusBadSignature, StatusRevoked:
		return reject(envelope.CodePerm, "%s", signatureReason(*v))
	}
	actor, reason := r.speaker(ctx, in, env, *v)
	if reason != "" {
		return reject(envelope.CodePerm, "%s", reason)
	}
	if v.Status == StatusFirstUse {
		// A first use proves only that the signer holds the key it
		// announces; it may claim a key id nobody else holds.
		if owner, ok := r.book.KeyOwner(v.Pkid); ok && !attention.SameActor(owner, actor) {
			return reject(envelope.CodePerm, "key id %q belongs to %s; a first use by %s pins nothing", v.Pkid, owner, actor)
		}
	}
	if r.require && v.Status != StatusVerified && v.Status != StatusFirstUse {
		return reject(envelope.CodePerm, "the relay requires signed envelopes (status %s)", v.Status)
	}
	var revoke *revocation
	if strings.EqualFold(env.Intent, envelope.IntentRevoke) {
		if revoke, reason = r.mayRevoke(ctx, in, env, *v, actor); reason != "" {
			return reject(envelope.CodePerm, "%s", reason)
		}
	}
	// Every rule allows the envelope: only now may it change the trust
	// store.
	if v.Pending && r.keeper != nil {
		if byMail(in) {
			// Anyone can mail in anyone's name: the key is pinned, but
			// its holder is not the header's sender (docs/security.md).
			*v = r.keeper.PinSeen(ctx, *v, actor)
		} else {
			*v = r.keeper.Pin(ctx, *v, actor)
		}
		if v.Status != StatusFirstUse && v.Status != StatusVerified {
			return reject(envelope.CodePerm, "%s", signatureReason(*v))
		}
	}
	if revoke != nil {
		if err := r.revoke(ctx, in, revoke, actor); err != nil {
			return reject(envelope.CodePerm, "revoking key %q: %v", revoke.pkid, err)
		}
	}
	o.Actor = actor
	return o
}

func signatureReason(v Verification) string {
	reason := "signature " + v.Status
	if v.Err != nil {
		reason += ": " + v.Err.Error()
	}
	return reason
}

// speaker decides who speaks in env (docs/security.md "Who speaks"): the
// header's sender when the envelope verifies under a key that the address
// book, or that sender's own first use, assigns to it; otherwise the
// authenticated principal, who may then only name itself as the sender.
// A signature by a key nobody is known to hold proves nothing about the
// sender. Without a principal (loopback without tokens, folder,
// clipboard, mail) the header's sender speaks: whoever can write to those
// media is trusted as the local user. It returns the actor, or why the
// envelope is refused.
func (r *Relay) speaker(ctx context.Context, in Intake, env *envelope.Envelope, v Verification) (actor, reason string) {
	sender := r.book.ActorID(env.From)
	if v.Status == StatusVerified || v.Status == StatusFirstUse {
		// The address book names the sender's key ids: a signature by any
		// other key proves nothing about the sender, so it speaks for the
		// sender only when the sender itself is the authenticated
		// principal. Otherwise a stranger on an unauthenticated medium
		// (mail) would speak as the sender with a fresh key, and pin that
		// key as the sender's for every later envelope.
		if a, ok := r.book.Agent(sender); ok && len(a.Keys) > 0 && !slices.Contains(a.Keys, v.Pkid) &&
			(in.Principal == "" || r.book.ActorID(in.Principal) != sender) {
			return "", fmt.Sprintf("%s signs with key id %s (address book); key %q proves nothing about it", env.From, strings.Join(a.Keys, ", "), v.Pkid)
		}
	}
	if v.Status == StatusVerified {
		if holder := r.keyHolder(ctx, v.Pkid); holder != "" {
			// Exactly, as "S must be P" compares below: both are actor
			// ids, and a case fold would let the holder "ſam" speak as
			// "sam", which the ledger records as another actor.
			if holder != sender {
				return "", fmt.Sprintf("signed with %s's key %q but sent as %q", holder, v.Pkid, env.From)
			}
			return sender, ""
		}
	}
	// "S must be P" compares actor ids exactly: a case fold would let the
	// principal "sam" speak as "ſam", which the ledger records as
	// another actor.
	if in.Principal != "" && r.book.ActorID(in.Principal) != sender {
		switch v.Status {
		case StatusFirstUse:
			return "", fmt.Sprintf("principal %q may not send as %q: key %q is not pinned yet, so its signature proves nothing about the sender", in.Principal, env.From, v.Pkid)
		case StatusVerified:
			return "", fmt.Sprintf("principal %q may not send as %q: key %q is assigned to no actor", in.Principal, env.From, v.Pkid)
		}
		return "", fmt.Sprintf("principal %q may not send as %q", in.Principal, env.From)
	}
	return sender, ""
}

// byMail reports an intake by mail: the one medium without authentication
// that strangers can reach, where whoever mails the mailbox names any
// sender. The header still speaks there, but gains nothing that only an
// authenticated sender may have: a first use pins without making the
// sender the key's holder, and a REVOKE needs the signature of the key it
// revokes.
func byMail(in Intake) bool { return in.Principal == "" && in.Transport == "mail" }

// keyHolder returns the actor a key id belongs to: the address book's
// owner, else the actor whose first use pinned it; "" when nobody is known.
func (r *Relay) keyHolder(ctx context.Context, pkid string) string {
	if pkid == "" {
		return ""
	}
	if owner, ok := r.book.KeyOwner(pkid); ok {
		return owner
	}
	if r.keeper != nil {
		if by, ok := r.keeper.FirstUsedBy(ctx, pkid); ok {
			return r.book.ActorID(by)
		}
	}
	return ""
}

// revocation is a REVOKE the relay has allowed: the key id, and the key
// that signed it when the envelope is signed by the key it revokes.
type revocation struct {
	pkid string
	key  *signing.PublicKey
}

// mayRevoke decides whether actor may revoke the key id a REVOKE names
// (`meta: revoke` `Pkid:`): when the envelope is signed by that very key
// (its holder revokes it), when the key id is actor's — by the address
// book or its first use — or when the principal is one of the relay's
// admins. Anyone else changes nothing; the refusal is logged and
// answered. A REVOKE naming no key id withdraws consent, not a key, and a
// relay without a trust store (no TrustKeeper) has no key to change:
// both are recorded as they are (nil revocation).
func (r *Relay) mayRevoke(ctx context.Context, in Intake, env *envelope.Envelope, v Verification, actor string) (*revocation, string) {
	target, _ := env.MetaValue("revoke", "Pkid")
	// In NFC, as a sig line's pkid= and the trust store's key ids are: a
	// REVOKE pasted in NFD names the same key.
	if target = norm.NFC.String(strings.TrimSpace(target)); target == "" || r.keeper == nil {
		return nil, ""
	}
	switch {
	case (v.Status == StatusVerified || v.Status == StatusFirstUse) && v.Pkid == target:
		return &revocation{pkid: target, key: v.Key}, ""
	case in.Principal != "" && r.admins[strings.ToLower(in.Principal)]:
		return &revocation{pkid: target}, ""
	}
	holder := r.keyHolder(ctx, target)
	var why string
	switch {
	case byMail(in):
		// The owner may revoke unsigned because its token authenticates
		// it; mail authenticates nobody.
		why = fmt.Sprintf("a REVOKE by mail revokes only the key that signs it: mail does not authenticate %s, and key %q did not sign this one", actor, target)
	case holder != "" && holder == actor: // actor ids, exactly (speaker)
		return &revocation{pkid: target}, ""
	default:
		if holder == "" {
			holder = "no known actor"
		}
		why = fmt.Sprintf("%s may not revoke key %q: it belongs to %s, and the REVOKE is not signed by that key", actor, target, holder)
	}
	r.log.LogAttrs(ctx, slog.LevelWarn, "revocation refused", slog.String("pkid", target), slog.String("by", actor),
		slog.String("principal", in.Principal), slog.String("transport", in.Transport), slog.String("source", in.Source))
	return nil, why
}

// revoke applies an allowed revocation to the trust store. A key id with
// nothing pinned, revoked without a key, leaves nothing to mark.
func (r *Relay) revoke(ctx context.Context, in Intake, rv *revocation, actor string) error {
	err := r.keeper.Revoke(ctx, rv.pkid, rv.key)
	if errors.Is(err, signing.ErrUnknownKey) && rv.key == nil {
		r.log.LogAttrs(ctx, slog.LevelInfo, "revocation of a key id with no pinned key", slog.String("pkid", rv.pkid), slog.String("by", actor))
		return nil
	}
	if err != nil {
		return err
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, "key revoked", slog.String("pkid", rv.pkid), slog.String("by", actor),
		slog.String("principal", in.Principal), slog.Bool("signed_by_key", rv.key != nil))
	return nil
}

func (r *Relay) verify(ctx context.Context, env *envelope.Envelope) Verification {
	if r.verifier != nil {
		return r.verifier.Verify(ctx, env)
	}
	if env.Signed() {
		return Verification{Status: StatusUnknownKey, Err: errors.New("the relay has no trust store")}
	}
	return Verification{Status: StatusUnsigned}
}

// Touch records activity of an agent (API, MCP, channel) for liveness
// (Heartbeat without an answer; a failure to record is logged).
func (r *Relay) Touch(agent string) {
	ctx, cancel := context.WithTimeout(context.Background(), touchTimeout)
	defer cancel()
	if _, err := r.live.Beat(ctx, agent); err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "recording liveness failed", slog.String("agent", agent), slog.Any("err", err))
	}
}

// touchTimeout bounds the ledger write of a Touch (rare: transitions and
// renewals only, package liveness).
const touchTimeout = 5 * time.Second

// LastSeen returns every known agent's last activity, by lower-cased id:
// this relay's sightings and those recorded in the ledger by any relay.
func (r *Relay) LastSeen() map[string]time.Time { return r.live.Seen() }

// normalizeGroups returns groups with contexts and group ids in NFC, the
// form envelopes are read in (envelope.NormalizeIdentifier).
func normalizeGroups(groups map[string]string) map[string]string {
	out := make(map[string]string, len(groups))
	for ctx, g := range groups {
		if n, err := envelope.NormalizeIdentifier(ctx); err == nil {
			ctx = n
		}
		if n, err := envelope.NormalizeIdentifier(g); err == nil {
			g = n
		}
		out[ctx] = g
	}
	return out
}

// Group returns the ledger group for an envelope context.
func (r *Relay) Group(context string) string {
	if g, ok := r.groups[context]; ok {
		return g
	}
	if context == "" {
		return DefaultGroup
	}
	return context
}

// component returns the logger of one part of the relay: Options.Logger
// with component=name, one component key per line (docs/operations.md).
func (r *Relay) component(name string) *slog.Logger {
	return r.logBase.With("component", name)
}

// Receipt returns the envelope a transport sends back for o: for an
// accepted envelope an ACK whose parent is its message and whose
// `meta: receipt` names the event; for a rejected one the ERROR envelope
// (spec "Error Envelope Format").
func (r *Relay) Receipt(o Outcome) *envelope.Envelope {
	orig := o.Envelope
	if orig == nil {
		orig = &envelope.Envelope{From: "UNKNOWN", To: r.name}
	}
	if o.Reject != nil {
		body := o.Reject.Error()
		e := envelope.NewError(orig, o.Reject.Code, o.Reject.Reason, body)
		e.From = r.name
		if o.Event.ID != "" {
			e.Meta[0].Fields = append(e.Meta[0].Fields, envelope.Field{Key: "Event-ID", Value: o.Event.ID})
		}
		return e
	}
	e := envelope.NewReply(orig, envelope.IntentAck, "recorded")
	e.From = r.name
	if o.Duplicate {
		e.Body = "already recorded"
	}
	if o.Differs {
		e.Body = differsNote
	}
	// The block and its fields in one allocation: a receipt per envelope.
	m := new(receiptMeta)
	m.fields = [...]envelope.Field{
		{Key: "Event-ID", Value: o.Event.ID},
		{Key: "Group", Value: o.Event.GroupID},
		{Key: "Seq", Value: strconv.FormatInt(o.Event.Seq, 10)},
		{Key: "Duplicate", Value: strconv.FormatBool(o.Duplicate)},
		{Key: "Verification", Value: o.Verification.Status},
		{Key: "Differs", Value: "true"},
	}
	fields := m.fields[:5]
	if o.Differs {
		fields = m.fields[:]
	}
	m.meta[0] = envelope.Meta{Namespace: "receipt", Fields: fields}
	e.Meta = m.meta[:]
	return e
}

// differsNote is the body of a receipt for a duplicate that differs from
// the recorded envelope (Outcome.Differs).
const differsNote = "already recorded, with other content: this envelope differs from the one recorded under its message id, which stands; send a change with a new message id"

// receiptMeta holds the `meta: receipt` block of a receipt.
type receiptMeta struct {
	meta   [1]envelope.Meta
	fields [6]envelope.Field
}
