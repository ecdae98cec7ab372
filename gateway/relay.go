package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// Verification statuses (DESIGN §4.3). A Verifier returns one of them.
const (
	StatusUnsigned     = "unsigned"
	StatusVerified     = "verified"
	StatusFirstUse     = "first-use"
	StatusKeyChanged   = "key-changed"
	StatusBadSignature = "bad-signature"
	StatusUnknownKey   = "unknown-key"
	StatusRevoked      = "revoked"
)

// Verification is the outcome of checking one envelope's signature.
type Verification struct {
	Status string // one of the Status constants
	Pkid   string // key id named by the signature, if any
	Alg    string // "ed25519" or "secp256r1", if signed
	Err    error  // why a signature did not verify, for the ERROR envelope
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
	// logged.
	Logger *slog.Logger
	// Book maps addresses, keys and roles to actors.
	Book *AddressBook
	// Verifier checks signatures; nil records every envelope as unsigned
	// or, if it carries a signature, unknown-key.
	Verifier Verifier
	// Groups maps an envelope's context to a ledger group; a context not in
	// the map is its own group, and an empty context is DefaultGroup.
	Groups map[string]string
	// RequireSignature rejects (E-PERM) envelopes that are not verified or
	// first-use.
	RequireSignature bool
	// Name is the sender of the relay's own envelopes (receipts, errors);
	// "SYSTEM" when empty, as in the spec's HTTP binding.
	Name string
	// ClaimTTL is how long a claim lasts; DefaultClaimTTL when zero.
	ClaimTTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DefaultGroup is the group of envelopes without a context.
const DefaultGroup = "default"

// DefaultClaimTTL is C2A's default claim lifetime (DESIGN §5.4).
const DefaultClaimTTL = 10 * time.Minute

// MaxIntake bounds one intake (an HTTP body, a mail, a file): several
// envelopes of up to envelope.MaxEnvelopeSize each plus chat text.
const MaxIntake = 8 << 20

// Relay is the relay core. It is safe for concurrent use.
type Relay struct {
	store    ledger.Store
	log      *slog.Logger
	book     *AddressBook
	verifier Verifier
	groups   map[string]string
	require  bool
	name     string
	claimTTL time.Duration
	now      func() time.Time

	mu       sync.Mutex
	lastSeen map[string]time.Time
	trackers map[string]*trackerState // see resumeTracker
}

// New returns a relay that records into store.
func New(store ledger.Store, opts *Options) *Relay {
	if opts == nil {
		opts = &Options{}
	}
	r := &Relay{
		store:    store,
		log:      opts.Logger,
		book:     opts.Book,
		verifier: opts.Verifier,
		groups:   opts.Groups,
		require:  opts.RequireSignature,
		name:     opts.Name,
		claimTTL: opts.ClaimTTL,
		now:      opts.Now,
		lastSeen: map[string]time.Time{},
		trackers: map[string]*trackerState{},
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
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
	return r
}

// Store returns the relay's ledger.
func (r *Relay) Store() ledger.Store { return r.store }

// Book returns the relay's address book.
func (r *Relay) Book() *AddressBook { return r.book }

// Name returns the sender name of the relay's own envelopes.
func (r *Relay) Name() string { return r.name }

// Intake is one batch of text arriving on a transport.
type Intake struct {
	// Transport names the medium: "http", "api", "mail", "folder",
	// "clipboard".
	Transport string
	// Principal is the authenticated sender, "" when the transport has no
	// authentication. An authenticated principal may only send envelopes
	// as its own actor, unless they are signed by a key it does not own
	// but that verifies (a forwarded, signed envelope).
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
	// Verification is the signature check's result.
	Verification Verification
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

// ErrNoEnvelope is returned by Ingest when the intake holds no envelope at
// all; it is recorded in the ledger like any rejection.
var ErrNoEnvelope = errors.New("gateway: no envelope in the input")

// Ingest runs the pipeline for one intake and returns one outcome per
// envelope found, in order. Every outcome, accepted or rejected, is durable
// in the ledger when Ingest returns without error. An error means the
// ledger could not be written, and nothing may be acknowledged.
func (r *Relay) Ingest(ctx context.Context, in Intake) ([]Outcome, error) {
	data, err := io.ReadAll(io.LimitReader(in.Data, MaxIntake+1))
	if err != nil {
		return nil, fmt.Errorf("gateway: reading %s intake: %w", in.Transport, err)
	}
	var outs []Outcome
	if len(data) > MaxIntake {
		outs = []Outcome{{Reject: &Rejection{Code: envelope.CodeTooLarge, Reason: fmt.Sprintf("input larger than %d bytes", MaxIntake)}}}
	} else {
		outs = r.check(ctx, in, data)
		if len(outs) == 0 {
			outs = []Outcome{{Reject: &Rejection{Code: envelope.CodeFormat, Reason: "no envelope found in the input"}}}
		}
	}
	recs := make([]ledger.Record, len(outs))
	for i := range outs {
		recs[i] = r.record(ctx, in, &outs[i])
	}
	res, err := r.store.Append(ctx, recs)
	if err != nil {
		return nil, fmt.Errorf("gateway: recording %s intake: %w", in.Transport, err)
	}
	for i := range outs {
		outs[i].Event, outs[i].Duplicate = res[i].Event, res[i].Duplicate
	}
	if err := r.refuseSquatters(ctx, in, outs); err != nil {
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

// refuseSquatters turns a "duplicate" whose first event came from another
// sender into an E-PERM rejection: a message id is the sender's, and an
// envelope must not be acknowledged as recorded when another actor's event
// holds its id (an id squatted first, or a forged retry).
func (r *Relay) refuseSquatters(ctx context.Context, in Intake, outs []Outcome) error {
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
		if sender := r.book.ActorID(o.Envelope.From); !strings.EqualFold(d.X.Sender, sender) {
			o.Reject = &Rejection{Code: envelope.CodePerm, Line: o.Envelope.Line,
				Reason: fmt.Sprintf("message id %s is already recorded from %s, not %s", o.Envelope.Message, d.X.Sender, sender)}
			o.Duplicate = false
			recs = append(recs, r.rejectionRecord(in, o))
			idx = append(idx, i)
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

// check reads and checks every envelope of data.
func (r *Relay) check(ctx context.Context, in Intake, data []byte) []Outcome {
	rd := envelope.NewBytesReader(data)
	var outs []Outcome
	for {
		env, err := rd.Next()
		if err == io.EOF {
			return outs
		}
		var se *envelope.SyntaxError
		if errors.As(err, &se) {
			outs = append(outs, Outcome{Reject: &Rejection{Code: se.Code, Reason: se.Msg, Line: se.Line}})
			continue
		}
		if err != nil { // cannot happen on a bytes.Reader; keep it loud
			outs = append(outs, Outcome{Reject: &Rejection{Code: envelope.CodeFormat, Reason: err.Error()}})
			return outs
		}
		outs = append(outs, r.checkEnvelope(ctx, in, env))
	}
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
	o.Verification = r.verify(ctx, env)
	switch o.Verification.Status {
	case StatusKeyChanged, StatusBadSignature, StatusRevoked:
		reason := "signature " + o.Verification.Status
		if o.Verification.Err != nil {
			reason += ": " + o.Verification.Err.Error()
		}
		return reject(envelope.CodePerm, "%s", reason)
	}
	verified := o.Verification.Status == StatusVerified || o.Verification.Status == StatusFirstUse
	if r.require && !verified {
		return reject(envelope.CodePerm, "the relay requires signed envelopes (status %s)", o.Verification.Status)
	}
	sender := r.book.ActorID(env.From)
	if verified {
		if owner, ok := r.book.KeyOwner(o.Verification.Pkid); ok && !strings.EqualFold(owner, sender) {
			return reject(envelope.CodePerm, "signed with %s's key %q but sent as %q", owner, o.Verification.Pkid, env.From)
		}
	} else if in.Principal != "" && !strings.EqualFold(in.Principal, sender) {
		return reject(envelope.CodePerm, "principal %q may not send as %q", in.Principal, env.From)
	}
	return o
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

// Touch records activity of an agent (API, MCP, channel) for liveness.
func (r *Relay) Touch(agent string) {
	r.mu.Lock()
	r.lastSeen[strings.ToLower(agent)] = r.now()
	r.mu.Unlock()
}

// LastSeen returns a copy of every agent's last activity.
func (r *Relay) LastSeen() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]time.Time, len(r.lastSeen))
	for k, v := range r.lastSeen {
		out[k] = v
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
	e.Meta = []envelope.Meta{{Namespace: "receipt", Fields: []envelope.Field{
		{Key: "Event-ID", Value: o.Event.ID},
		{Key: "Group", Value: o.Event.GroupID},
		{Key: "Seq", Value: fmt.Sprint(o.Event.Seq)},
		{Key: "Duplicate", Value: fmt.Sprint(o.Duplicate)},
		{Key: "Verification", Value: o.Verification.Status},
	}}}
	return e
}
