package envelope

import (
	"strings"
	"time"
)

// New returns a new v1.1 envelope from one sender to one receiver with
// fresh thread and message ids, a fresh session (NewSession) and
// `sig: none`. The caller fills in the
// rest (User, Context, Meta, …) before writing it.
func New(from, to, intent, body string) *Envelope {
	return &Envelope{
		From: from, To: to, Version: 1,
		Session: NewSession(time.Now()), Thread: NewID(), Message: NewID(),
		Intent: intent, Body: body, Sig: "none", Complete: true,
	}
}

// NewReply returns a reply to orig: sender and receiver swapped, the same
// user, session, thread and context, parent set to orig's message, a fresh
// message id and `sig: none`. When orig has no thread (v1.0), the reply
// starts one named after orig's message, or a fresh one; when it has no
// session, the reply gets a fresh one.
func NewReply(orig *Envelope, intent, body string) *Envelope {
	e := &Envelope{
		From: orig.To, To: orig.From, Version: 1,
		User: orig.User, Session: orig.Session, Thread: orig.Thread,
		Parent: orig.Message, Message: NewID(), Context: orig.Context,
		Intent: intent, Body: body, Sig: "none", Complete: true,
	}
	if e.Session == "" {
		e.Session = NewSession(time.Now())
	}
	if e.Thread == "" {
		e.Thread = orig.Message
	}
	if e.Thread == "" {
		e.Thread = e.Message
	}
	return e
}

// NewError returns the ERROR envelope answering orig (spec "Error Envelope
// Format"): from orig's receiver back to its sender, `user: system`,
// `parent` = orig's message, and a `meta: error` block with Code, Reason and
// Original-Intent. orig may be nil when the input could not be parsed at
// all; the error then goes from "SYSTEM" to "UNKNOWN" unless the caller
// changes From and To.
func NewError(orig *Envelope, code Code, reason, body string) *Envelope {
	if orig == nil {
		orig = &Envelope{From: "UNKNOWN", To: "SYSTEM"}
	}
	e := NewReply(orig, IntentError, body)
	e.User = "system"
	fields := []Field{{Key: "Code", Value: string(code)}}
	if reason != "" {
		fields = append(fields, Field{Key: "Reason", Value: oneLine(reason)})
	}
	if orig.Intent != "" {
		fields = append(fields, Field{Key: "Original-Intent", Value: orig.Intent})
	}
	e.Meta = []Meta{{Namespace: "error", Fields: fields}}
	return e
}

// oneLine turns s into a value that fits on one field line.
func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\r' || c == '\n' || c == '\t' {
			b[i] = ' '
		}
	}
	return string(bytesTrimSpace(b))
}

func bytesTrimSpace(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// CleanBody returns s as a Reader would return it as a body: CRLF and CR
// turned into LF and trailing blank lines dropped. Composing an envelope
// with a cleaned body guarantees that it reads back with the same body.
func CleanBody(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	for len(lines) > 0 && strings.Trim(lines[len(lines)-1], " \t") == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}
