package envelope

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Envelope is one AI Crosstalk envelope. The zero value is not useful; get
// one from a Reader, Unmarshal, New, NewReply or NewError.
//
// String fields hold the values as read (trimmed); an empty string means the
// field is absent. JSON encoding gives the form of docs/design.md §3.4 /
// docs/format.md §11.
type Envelope struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Version int    `json:"version"` // major version from the header; always 1

	User    string `json:"user,omitempty"`
	Session string `json:"session,omitempty"`
	Thread  string `json:"thread,omitempty"`
	Parent  string `json:"parent,omitempty"`
	Message string `json:"message,omitempty"`
	Context string `json:"context,omitempty"`

	// Intent is the v1.1 intent (REQUEST, RESPOND, …), or an unknown
	// intent verbatim. LegacyIntent holds the original text when a v1.0
	// intent was mapped (QUESTION → REQUEST).
	Intent       string `json:"intent,omitempty"`
	LegacyIntent string `json:"legacy_intent,omitempty"`

	// Fields holds unknown top-level fields, in input order.
	Fields []Field `json:"fields,omitempty"`
	// Meta holds the META blocks, in input order, duplicates included.
	Meta []Meta `json:"meta,omitempty"`

	// Body is the body text: one two-space indent removed per line, no
	// trailing empty lines, no trailing newline.
	Body string `json:"body"`
	// Sig is the value of the sig: line ("none" when unsigned); empty when
	// the envelope had no sig: line.
	Sig string `json:"sig,omitempty"`

	// Complete reports whether the envelope ended with [[END]]. Only the
	// lenient Reader returns incomplete envelopes.
	Complete bool `json:"complete"`
	// Line is the 1-based input line of the header; 0 for composed
	// envelopes.
	Line int `json:"line"`

	// ResponseForm reports that the body came in the v1.0 `response: |`
	// form. The Writer writes the v1.1 form unless asked for v1.0.
	ResponseForm bool `json:"-"`

	source   []byte
	warnings []string
}

// Field is one `key: value` line: an unknown top-level field or a line of a
// META block.
type Field struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Meta is one META block: `meta: <namespace>` followed by its fields.
type Meta struct {
	Namespace string  `json:"namespace"`
	Fields    []Field `json:"fields"`
}

// MarshalJSON encodes the block with "fields" always an array, never null.
func (m Meta) MarshalJSON() ([]byte, error) {
	type plain Meta
	if m.Fields == nil {
		m.Fields = []Field{}
	}
	return json.Marshal(plain(m))
}

// Source returns the envelope as it stood in the input, from the header line
// to the [[END]] line (or the last line read, for an incomplete envelope):
// line ends turned into LF, the quote prefix and surrounding fence removed,
// every line LF-terminated, nothing else changed. Signatures are computed
// from these bytes (docs/design.md §4.1), never from a re-serialization. It is nil
// for envelopes that were not read from text. The caller must not modify it.
func (e *Envelope) Source() []byte { return e.source }

// Warnings returns what the Reader found questionable but accepted: an
// unknown intent, an id that is neither ULID nor UUIDv7, an address it
// cannot classify. Strict mode turns the last two into errors.
func (e *Envelope) Warnings() []string { return e.warnings }

// MetaValue returns the value of the first key in the first META block of
// the namespace, and whether it was found.
func (e *Envelope) MetaValue(namespace, key string) (string, bool) {
	for _, m := range e.Meta {
		if m.Namespace != namespace {
			continue
		}
		for _, f := range m.Fields {
			if f.Key == key {
				return f.Value, true
			}
		}
	}
	return "", false
}

// Signed reports whether the envelope carries a signature: a sig: line
// other than "none", in any case and whatever Unicode spaces surround it
// (a chat UI's no-break space), as package signing reads it
// (docs/signing.md §3).
func (e *Envelope) Signed() bool {
	v := strings.TrimSpace(e.Sig)
	return v != "" && !strings.EqualFold(v, "none")
}

// Clone returns a deep copy of e, including its source bytes.
func (e *Envelope) Clone() *Envelope {
	c := *e
	c.Fields = append([]Field(nil), e.Fields...)
	c.Meta = make([]Meta, len(e.Meta))
	for i, m := range e.Meta {
		c.Meta[i] = Meta{Namespace: m.Namespace, Fields: append([]Field{}, m.Fields...)}
	}
	if e.Meta == nil {
		c.Meta = nil
	}
	c.source = append([]byte(nil), e.source...)
	if e.source == nil {
		c.source = nil
	}
	c.warnings = append([]string(nil), e.warnings...)
	return &c
}

// String returns a one-line summary for logs: header, intent and message id.
func (e *Envelope) String() string {
	s := fmt.Sprintf("[[%s→%s v%d]] %s", e.From, e.To, e.Version, e.Intent)
	if e.Message != "" {
		s += " " + e.Message
	}
	return s
}
