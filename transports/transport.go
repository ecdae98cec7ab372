// Package transports holds the one small interface every medium that moves
// envelopes implements — HTTP (httpx), watched folders (folder), the
// clipboard (clipboard) and email (mail) — in both directions (docs/design.md
// §5.5, spec "Transport Bindings"). Each medium lives in its own
// subpackage, so a program that only parses never links IMAP code.
//
// A Receiver watches its medium and hands every piece of text that may hold
// envelopes to a Handler, together with the way back to its sender when
// the medium has one. The Handler (the relay) answers only after the text
// is durably recorded; only then may the Receiver mark the text processed
// (move the file, flag the mail). If the Handler fails, the text stays and
// is offered again, so nothing is lost; the relay's de-duplication makes
// offering it twice harmless.
//
// A Sender delivers envelope text to an address on its medium.
//
// What this package does not do: parse envelopes, retry (the relay's
// outbound dispatcher retries with backoff), or decide routes (the relay's
// address book does).
package transports

import (
	"context"
	"errors"
)

// Inbound is text that arrived on a medium.
type Inbound struct {
	// Transport names the medium: "folder", "clipboard", "mail", "http".
	Transport string
	// Source says where the text came from: a file path, a mail's
	// Message-ID and UID, "clipboard".
	Source string
	// Data is the text, which may hold several envelopes and chat noise.
	Data []byte
	// CanReply reports whether the medium has a way back to the sender
	// (a mail's From, an HTTP response); if so the Receiver delivers the
	// Handler's reply there.
	CanReply bool
}

// Handler takes inbound text. It returns after the text's envelopes are
// durably recorded (accepted or rejected), with the reply — receipt or
// ERROR envelopes — to send back when in.CanReply. An error means nothing
// was recorded: the Receiver must keep the text and offer it again.
type Handler func(ctx context.Context, in Inbound) (reply []byte, err error)

// Receiver watches a medium and calls h for every new piece of text, until
// ctx ends or the medium fails. It returns nil when ctx ended.
type Receiver interface {
	Receive(ctx context.Context, h Handler) error
}

// Sender delivers envelope text to an address on its medium. id is the
// envelope's message id: media with an idempotency or de-duplication
// mechanism (a file name, Message-ID, Idempotency-Key) use it, so a retry
// after an unclear failure delivers once.
type Sender interface {
	Send(ctx context.Context, to, id string, text []byte) error
}

// ErrPermanent is wrapped by Send errors that retrying cannot fix (an
// address that cannot exist, a text the medium refuses); the relay then
// gives up at once with an E-ROUTE error envelope instead of backing off.
var ErrPermanent = errors.New("transports: permanent failure")
