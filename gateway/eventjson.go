package gateway

import (
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

// The relay marshals the data of every event it records, and the data of
// an envelope's event holds the whole envelope twice (its JSON form and
// its raw text). encoding/json spends most of that time finding its way
// through the types by reflection; the functions below write the same
// bytes as json.Marshal, field by field (fuzzed against it in
// eventjson_test.go). A type they do not know (Digest) goes through
// json.Marshal, and so does a whole value whose encoding fails.

// eventJSON returns json.Marshal(*d), in a slice of its own: the bytes
// become a ledger record's Data, which the store and the caller keep.
func eventJSON(d *EventData) json.RawMessage {
	bp := jsonBufs.Get().(*[]byte)
	b, err := appendEventData((*bp)[:0], d)
	var out []byte
	if err == nil {
		out = append(make([]byte, 0, len(b)), b...)
	}
	if cap(b) <= maxPooledJSON {
		*bp = b
		jsonBufs.Put(bp)
	}
	if err != nil {
		return mustJSONMarshal(d) // json.Marshal's own error, or its panic
	}
	return out
}

// jsonBufs recycles eventJSON's scratch buffers, which never leave it.
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledJSON bounds the buffers jsonBufs keeps, so that one large
// envelope does not pin its buffer.
const maxPooledJSON = 64 << 10

// appendEventData appends json.Marshal(*d) to b. An error is one
// json.Marshal would return too (a time it cannot write, a Digest it
// refuses).
func appendEventData(b []byte, d *EventData) ([]byte, error) {
	var err error
	b = append(b, '{')
	b = appendStringOmit(b, `"text":`, d.Text)
	b = appendStringOmit(b, `"format":`, d.Format)
	b = appendStringOmit(b, `"priority":`, d.Priority)
	b = appendStringsOmit(b, `"to":`, d.To)
	b = appendStringOmit(b, `"reply_to":`, d.ReplyTo)
	b = appendStringOmit(b, `"client_id":`, d.ClientID)
	if d.Obligation != nil {
		b = appendKey(b, `"obligation":`)
		if b, err = appendObligation(b, d.Obligation); err != nil {
			return b, err
		}
	}
	if d.Protocol != nil {
		b = appendKey(b, `"protocol":`)
		b = appendProtocol(b, d.Protocol)
	}
	// Provenance is embedded: its fields inline, in its place.
	b = appendStringOmit(b, `"src_group_id":`, d.SrcGroupID)
	b = appendStringOmit(b, `"src_event_id":`, d.SrcEventID)
	b = appendBoolOmit(b, `"summarized":`, d.Summarized)
	b = appendStringOmit(b, `"actor_id":`, d.ActorID)
	b = appendStringOmit(b, `"event_id":`, d.EventID)
	b = appendStringOmit(b, `"emoji":`, d.Emoji)
	b = appendStringOmit(b, `"signal":`, d.Signal)
	b = appendStringOmit(b, `"kind":`, d.Kind)
	b = appendStringOmit(b, `"title":`, d.Title)
	b = appendStringOmit(b, `"message":`, d.Message)
	b = appendStringOmit(b, `"target_actor_id":`, d.TargetActorID)
	b = appendStringOmit(b, `"related_event_id":`, d.RelatedEventID)
	b = appendBoolOmit(b, `"requires_ack":`, d.RequiresAck)
	b = appendStringOmit(b, `"notify_event_id":`, d.NotifyEventID)
	b = appendStringOmit(b, `"disposition":`, d.Disposition)
	b = appendStringOmit(b, `"state":`, d.State)
	b = appendStringOmit(b, `"expires_at":`, d.ExpiresAt)
	b = appendStringOmit(b, `"note":`, d.Note)
	if d.Digest != nil {
		// Rare (one per agent and window): encoding/json's.
		dg, err := json.Marshal(d.Digest)
		if err != nil {
			return b, err
		}
		b = appendKey(b, `"digest":`)
		b = append(b, dg...)
	}
	if d.X != nil {
		b = appendKey(b, `"x_crosstalk":`)
		b = appendXCrosstalk(b, d.X)
	}
	return append(b, '}'), nil
}

// appendXCrosstalk appends json.Marshal(*x).
func appendXCrosstalk(b []byte, x *XCrosstalk) []byte {
	b = append(b, `{"envelope":`...)
	if x.Envelope == nil {
		b = append(b, "null"...)
	} else {
		b = appendEnvelope(b, x.Envelope)
	}
	b = append(b, `,"raw":`...)
	b = appendJSONString(b, x.Raw)
	b = append(b, `,"transport":`...)
	b = appendJSONString(b, x.Transport)
	b = appendStringOmit(b, `"source":`, x.Source)
	b = append(b, `,"sender":`...)
	b = appendJSONString(b, x.Sender)
	b = appendStringOmit(b, `"principal":`, x.Principal)
	b = append(b, `,"verified":`...)
	b = strconv.AppendBool(b, x.Verified)
	b = append(b, `,"verification":`...)
	b = appendJSONString(b, x.Verification)
	b = appendStringOmit(b, `"pkid":`, x.Pkid)
	b = appendBoolOmit(b, `"assigned_ids":`, x.AssignedIDs)
	b = appendStringOmit(b, `"idempotency_key":`, x.IdempotencyKey)
	b = appendStringsOmit(b, `"warnings":`, x.Warnings)
	b = appendStringsOmit(b, `"route":`, x.Route)
	return append(b, '}')
}

// appendEnvelope appends json.Marshal(*e) (docs/design.md §3.4).
func appendEnvelope(b []byte, e *envelope.Envelope) []byte {
	b = append(b, `{"from":`...)
	b = appendJSONString(b, e.From)
	b = append(b, `,"to":`...)
	b = appendJSONString(b, e.To)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(e.Version), 10)
	b = appendStringOmit(b, `"user":`, e.User)
	b = appendStringOmit(b, `"session":`, e.Session)
	b = appendStringOmit(b, `"thread":`, e.Thread)
	b = appendStringOmit(b, `"parent":`, e.Parent)
	b = appendStringOmit(b, `"message":`, e.Message)
	b = appendStringOmit(b, `"context":`, e.Context)
	b = appendStringOmit(b, `"intent":`, e.Intent)
	b = appendStringOmit(b, `"legacy_intent":`, e.LegacyIntent)
	if len(e.Fields) > 0 {
		b = append(b, `,"fields":`...)
		b = appendFields(b, e.Fields)
	}
	if len(e.Meta) > 0 {
		b = append(b, `,"meta":[`...)
		for i, m := range e.Meta {
			if i > 0 {
				b = append(b, ',')
			}
			// Meta.MarshalJSON: "fields" always an array.
			b = append(b, `{"namespace":`...)
			b = appendJSONString(b, m.Namespace)
			b = append(b, `,"fields":`...)
			b = appendFields(b, m.Fields)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"body":`...)
	b = appendJSONString(b, e.Body)
	b = appendStringOmit(b, `"sig":`, e.Sig)
	b = append(b, `,"complete":`...)
	b = strconv.AppendBool(b, e.Complete)
	b = append(b, `,"line":`...)
	b = strconv.AppendInt(b, int64(e.Line), 10)
	return append(b, '}')
}

// appendFields appends fs as a JSON array, [] when empty.
func appendFields(b []byte, fs []envelope.Field) []byte {
	b = append(b, '[')
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, f.Key)
		b = append(b, `,"value":`...)
		b = appendJSONString(b, f.Value)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendObligation appends json.Marshal(*ob).
func appendObligation(b []byte, ob *attention.Obligation) ([]byte, error) {
	b = append(b, `{"blocks":`...)
	b = appendJSONString(b, string(ob.Blocks))
	b = appendStringOmit(b, `"default_action":`, ob.DefaultAction)
	b = appendStringOmit(b, `"delegate":`, ob.Delegate)
	if !ob.Deadline.IsZero() { // omitzero
		t, err := ob.Deadline.MarshalJSON() // as encoding/json does
		if err != nil {
			return b, err
		}
		b = append(b, `,"deadline":`...)
		b = append(b, t...)
	}
	b = appendBoolOmit(b, `"ack":`, ob.Ack)
	return append(b, '}'), nil
}

// appendProtocol appends json.Marshal(*p).
func appendProtocol(b []byte, p *Protocol) []byte {
	b = append(b, `{"event_type":`...)
	b = appendJSONString(b, p.EventType)
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, p.Subject)
	b = appendStringOmit(b, `"summary":`, p.Summary)
	b = appendStringOmit(b, `"next_action":`, p.NextAction)
	b = appendStringOmit(b, `"blocker":`, p.Blocker)
	b = appendStringOmit(b, `"requested_action":`, p.RequestedAction)
	b = appendStringOmit(b, `"urgency":`, p.Urgency)
	b = append(b, `,"requires_ack":`...)
	b = strconv.AppendBool(b, p.RequiresAck)
	return append(b, '}')
}

// appendKey appends key (`"name":`) after a comma unless it is the first
// member of the object b ends in.
func appendKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	return append(b, key...)
}

// appendStringOmit appends a string member with omitempty.
func appendStringOmit(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(appendKey(b, key), s)
}

// appendBoolOmit appends a bool member with omitempty.
func appendBoolOmit(b []byte, key string, v bool) []byte {
	if !v {
		return b
	}
	return append(appendKey(b, key), "true"...)
}

// appendStringsOmit appends a []string member with omitempty.
func appendStringsOmit(b []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(appendKey(b, key), '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// jsonSafe holds the bytes encoding/json writes as they are with HTML
// escaping on: printable ASCII, but not ", \\, <, > or &. Bytes of
// multi-byte characters are not in it: they need a look.
var jsonSafe = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\\<>&` {
		t[c] = false
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string: HTML
// characters, control characters, U+2028 and U+2029 escaped, and each
// byte of invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start, i := 0, 0
	for {
		i = safePrefix(s, i)
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other control characters, <, > and &
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// safePrefix returns the index of the first byte of s from i on that is
// not in jsonSafe, or len(s).
func safePrefix(s string, i int) int {
	for i < len(s) && jsonSafe[s[i]] {
		i++
	}
	return i
}
