package envelope

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// NewSession returns a session id in the form the spec's envelopes show
// ("2025-10-09T16Z abc123", docs/spec/ai-crosstalk-protocol-v1.1.md "Core
// Grammar Changes"): the hour of t in UTC and six random hex digits. v1.0
// parsers require a session line; every envelope this package composes has
// one.
func NewSession(t time.Time) string {
	var r [3]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24)
	return t.UTC().Format("2006-01-02T15Z") + " " + hex.EncodeToString(r[:])
}

// ErrNotV10 is wrapped by the errors of ToV10 for what the v1.0 protocol
// cannot say: an intent it lacks, or META blocks.
var ErrNotV10 = errors.New("envelope: not expressible in v1.0")

// V10Options say what ToV10 may give up.
type V10Options struct {
	// DropMeta drops META blocks (v1.0 has none) instead of refusing them.
	DropMeta bool
	// KeepIntents writes an intent v1.0 lacks (ACK, CLOSE, …) as it is
	// instead of refusing it. v1.0 parsers do not check the intent.
	KeepIntents bool
}

// v10Intents is the inverse of the spec's legacy mapping ("Legacy
// Intents"): only the two v1.1 intents that replace exactly one v1.0
// intent have a way back. BROADCAST replaced both STATUS and NOTE, so it
// has none.
var v10Intents = map[string]string{
	IntentRequest: "QUESTION",
	IntentRespond: "ANSWER",
}

// ToV10 returns a copy of e for v1.0 readers, to be written with a Writer
// whose V10 field is set: the intent mapped back to the v1.0 vocabulary
// (REQUEST → QUESTION, RESPOND → ANSWER; a legacy intent read from v1.0
// text is kept as it was written), a session line added when e has none,
// and the `body: |` form the spec shows for v1.0. An intent v1.0 lacks or a
// META block is an error wrapping ErrNotV10 unless opt allows it. Unknown
// fields, thread, parent and message are kept: v1.0 parsers ignore unknown
// headers. A signature does not survive the rewrite, so the copy carries
// `sig: none` when e was signed.
func ToV10(e *Envelope, opt V10Options) (*Envelope, error) {
	c := e.Clone()
	c.ResponseForm = false
	c.source = nil
	if c.LegacyIntent == "" {
		switch old, ok := v10Intents[c.Intent]; {
		case ok:
			c.LegacyIntent = old
		case !opt.KeepIntents:
			return nil, fmt.Errorf("%w: intent %s has no v1.0 equivalent (v1.0 knows QUESTION, ANSWER, STATUS, PATCH, NOTE)", ErrNotV10, c.Intent)
		}
	} else {
		c.LegacyIntent = strings.ToUpper(c.LegacyIntent)
	}
	if len(c.Meta) > 0 {
		if !opt.DropMeta {
			ns := make([]string, len(c.Meta))
			for i, m := range c.Meta {
				ns[i] = m.Namespace
			}
			return nil, fmt.Errorf("%w: META blocks (%s) would be lost", ErrNotV10, strings.Join(ns, ", "))
		}
		c.Meta = nil
	}
	if c.Session == "" {
		c.Session = NewSession(time.Now())
	}
	if c.Signed() {
		c.Sig = "none"
	}
	return c, nil
}

// MarshalV10 returns the v1.0 form of e (see Writer.V10).
func MarshalV10(e *Envelope) ([]byte, error) { return marshal(e, true) }
