package gateway

import (
	"encoding/json"
	"strconv"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

// Every connected stream encodes each of its agent's deliveries, so N
// harnesses cost N encodings of every envelope; encoding/json spends most
// of that time on reflection. AppendJSON writes the same bytes field by
// field, with eventjson.go's string and member helpers (fuzzed against
// json.Marshal in deliveryjson_test.go, which also fails when a field it
// does not know appears). A Digest, rare, goes through json.Marshal.

// AppendJSON appends json.Marshal(d) to b, byte for byte, and returns the
// extended slice. On an error, json.Marshal's own (a time outside what
// RFC 3339 can write, a Digest it refuses), it returns b as it was and
// that error.
func (d *Delivery) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	out, err := appendDelivery(b, d)
	if err == nil {
		return out, nil
	}
	// json.Marshal's error, word for word (it fails where appendDelivery
	// does, as the tests check).
	j, err := json.Marshal(d)
	if err != nil {
		return out[:n], err
	}
	return append(out[:n], j...), nil
}

// appendDelivery appends json.Marshal(*d) to b: the embedded
// attention.Delivery's members first, in its place, then Delivery's.
func appendDelivery(b []byte, d *Delivery) ([]byte, error) {
	var err error
	if b, err = appendAttentionDelivery(b, &d.Delivery); err != nil {
		return b, err
	}
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, d.Kind)
	b = append(b, `,"from":`...)
	b = appendJSONString(b, d.From)
	b = appendStringsOmit(b, `"to":`, d.To)
	b = appendStringOmit(b, `"intent":`, d.Intent)
	b = appendStringOmit(b, `"context":`, d.Context)
	b = appendStringOmit(b, `"message":`, d.MessageID)
	b = append(b, `,"ts":`...)
	b = appendJSONString(b, d.TS)
	b = appendStringOmit(b, `"content":`, d.Content)
	b = appendStringOmit(b, `"verification":`, d.Verification)
	b = appendBoolOmit(b, `"acked":`, d.Acked)
	if d.Obligation != nil {
		b = append(b, `,"obligation":`...)
		if b, err = appendObligation(b, d.Obligation); err != nil {
			return b, err
		}
	}
	if d.Protocol != nil {
		b = append(b, `,"protocol":`...)
		b = appendProtocol(b, d.Protocol)
	}
	b = appendBoolOmit(b, `"discharged":`, d.Discharged)
	b = appendStringOmit(b, `"discharges":`, d.Discharges)
	b = appendBoolOmit(b, `"responded":`, d.Responded)
	b = appendStringOmit(b, `"claimed_by":`, d.ClaimedBy)
	b = append(b, `,"liveness":`...)
	b = appendJSONString(b, string(d.Liveness))
	b = appendIntOmit(b, `"position":`, d.Position)
	if len(d.Fragments) > 0 {
		b = append(b, `,"fragments":[`...)
		for i := range d.Fragments {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendFragment(b, &d.Fragments[i])
		}
		b = append(b, ']')
	}
	if d.Digest != nil {
		// Rare (one per agent and window): encoding/json's.
		dg, err := json.Marshal(d.Digest)
		if err != nil {
			return b, err
		}
		b = append(b, `,"digest":`...)
		b = append(b, dg...)
	}
	return append(b, '}'), nil
}

// appendAttentionDelivery appends the members of json.Marshal(*a) to b
// after its '{', and leaves the object open for the embedding Delivery's.
func appendAttentionDelivery(b []byte, a *attention.Delivery) ([]byte, error) {
	b = append(b, `{"event_id":`...)
	b = appendJSONString(b, a.EventID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, a.Seq, 10)
	b = appendStringOmit(b, `"group":`, a.Group)
	b = appendStringOmit(b, `"thread":`, a.Thread)
	b = append(b, `,"agent":`...)
	b = appendJSONString(b, a.Agent)
	b = append(b, `,"directedness":`...)
	b = appendJSONString(b, string(a.Directedness))
	b = append(b, `,"policy":`...)
	b = appendJSONString(b, string(a.Policy))
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, string(a.Reason))
	b = append(b, `,"injection":`...)
	b = appendJSONString(b, string(a.Injection))
	b = append(b, `,"priority":`...)
	b = appendJSONString(b, a.Priority)
	if a.Knock != nil {
		b = append(b, `,"knock":`...)
		b = appendKnock(b, a.Knock)
	}
	b = appendBoolOmit(b, `"thread_context":`, a.ThreadContext)
	if !a.Deadline.IsZero() { // omitzero
		t, err := a.Deadline.MarshalJSON() // as encoding/json does
		if err != nil {
			return b, err
		}
		b = append(b, `,"deadline":`...)
		b = append(b, t...)
	}
	b = appendBoolOmit(b, `"expired":`, a.Expired)
	b = append(b, `,"idempotency_key":`...)
	b = appendJSONString(b, a.IdempotencyKey)
	return b, nil
}

// appendKnock appends json.Marshal(*k).
func appendKnock(b []byte, k *attention.Knock) []byte {
	b = append(b, `{"from":`...)
	b = appendJSONString(b, k.From)
	b = append(b, `,"where":`...)
	b = appendJSONString(b, k.Where)
	b = append(b, `,"directedness":`...)
	b = appendJSONString(b, string(k.Directedness))
	b = append(b, `,"policy":`...)
	b = appendJSONString(b, string(k.Policy))
	b = append(b, `,"priority":`...)
	b = appendJSONString(b, k.Priority)
	b = append(b, `,"topic":`...)
	b = appendJSONString(b, k.Topic)
	b = append(b, `,"pull_with":`...)
	b = appendJSONString(b, k.PullWith)
	return append(b, '}')
}

// appendFragment appends json.Marshal(*f).
func appendFragment(b []byte, f *Fragment) []byte {
	b = append(b, `{"event_id":`...)
	b = appendJSONString(b, f.EventID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, f.Seq, 10)
	b = appendIntOmit(b, `"position":`, f.Position)
	b = appendStringOmit(b, `"message":`, f.MessageID)
	b = append(b, `,"ts":`...)
	b = appendJSONString(b, f.TS)
	b = append(b, `,"policy":`...)
	b = appendJSONString(b, string(f.Policy))
	b = appendStringOmit(b, `"content":`, f.Content)
	return append(b, '}')
}

// appendIntOmit appends an int64 member with omitempty.
func appendIntOmit(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(appendKey(b, key), v, 10)
}
