// Package mail is the email binding of the envelope protocol (spec
// "Transport Bindings: Email", docs/design.md §5.5): a Sender that submits
// envelopes by SMTP and a Receiver that reads them from an IMAP mailbox,
// implementing transports.Sender and transports.Receiver.
//
// # Sending
//
// Each envelope text becomes one mail:
//
//	Subject: [AI Crosstalk] <context> - <intent>
//	Message-ID: <message-id@host>
//	In-Reply-To, References: <parent-id@host>
//	MIME-Version: 1.0
//	Content-Type: text/plain; charset=utf-8
//	Content-Transfer-Encoding: quoted-printable
//
// with From from Options.From, To from the address ("email:a@b",
// "mailto:a@b", "a@b"), Date, and the envelope text verbatim as the body.
// The body is always quoted-printable: it survives any relay byte for
// byte (long lines, trailing blanks, a line starting "From "), so a signed
// envelope still verifies after the trip. Header values taken from an
// envelope are sanitized: control characters (CR, LF, NUL, U+2028, …)
// become spaces, values are bounded and, when not plain ASCII,
// RFC 2047-encoded (mime.QEncoding); an envelope id that is not a
// dot-atom is replaced by a hash in Message-ID. No envelope content can
// add, end or split a header.
//
// The connection uses STARTTLS when the server offers it (or as
// Server.Security says) and AUTH PLAIN when Server.Username is set; a
// password is never sent unencrypted except to a loopback address. Dial,
// greeting, TLS handshake and every command are bounded by
// Options.Timeout and by the caller's context: an unreachable or silent
// server gives a wrapped error, never a hang. One server answer is
// bounded in size too: an SMTP reply with its continuation lines by
// MaxSMTPReply, an IMAP response outside a mail's body sections by
// MaxIMAPResponse; a server sending more ends the connection with an
// error naming the bound. SMTP 5xx answers, bad
// addresses and texts without envelope wrap transports.ErrPermanent.
//
// # Receiving
//
// The Receiver logs in, selects Options.Mailbox (INBOX), and waits with
// IDLE for new mail; without IDLE, or when IDLE fails, it polls every
// Options.PollInterval (a full scan also runs at that interval under
// IDLE). Dovecot reports new mail about 0.5 s after delivery under IDLE.
//
// Every mail above the last processed UID is handled in UID order:
//
//  1. Its text is found: text/plain parts (the text/plain alternative of
//     multipart/alternative; HTML, tags stripped, only when there is no
//     plain text), every part of multipart/mixed, forwarded message/rfc822
//     mail, *.crosstalk and *.aict attachments; quoted-printable and base64
//     are decoded, charsets converted to UTF-8 (UTF-8, Latin-1,
//     Windows-1252 and every WHATWG encoding), format=flowed unflowed.
//     Replies that quote earlier mail need nothing special: the envelope
//     Reader strips one level of "> ".
//  2. The Handler gets the text with CanReply set (when a reply Sender
//     was given): one call per MIME part that holds an envelope. Parts are
//     never joined, so an envelope split across parts arrives incomplete
//     and the relay rejects it with E-FORMAT (the split is also logged).
//     A mail without any envelope is handed over too (all its text), so
//     the relay records an E-FORMAT notice: nothing is dropped silently.
//     It is answered (with the relay's ERROR envelope) only when its
//     Subject carries "[AI Crosstalk]": ordinary mail that lands in the
//     mailbox is recorded, never answered. Still, every mail in the
//     mailbox is read and marked \Seen: give the Receiver a mailbox of its
//     own (an account, or a folder a server-side filter fills).
//  3. The Handler's reply, if any, is mailed to the mail's From address,
//     with In-Reply-To and References, marked "Auto-Submitted:
//     auto-replied". Never to Reply-To, and not at all when the
//     Return-Path (the SMTP envelope sender, recorded by the delivering
//     server and checked by SPF) has a domain other than From's or a
//     subdomain of it: Reply-To and From are whatever the mail says, and
//     answering an address a stranger chose would make the relay mail
//     third parties (backscatter). Automatic mail (Auto-Submitted,
//     Precedence bulk/list/junk, List-Id, bounces) gets CanReply=false:
//     no reply loops, no answers to mailer daemons.
//  4. Only after the Handler returned nil (and the reply was accepted) is
//     the mail marked: \Seen plus the keyword Options.ProcessedKeyword
//     ($CrosstalkProcessed), and moved to Options.MoveTo when set. Then
//     the state file records it.
//
// If the Handler fails, or a reply meets a temporary SMTP failure, the
// mail stays unmarked and is offered again after a pause (1 s doubling up
// to PollInterval); later mail waits behind it, so order is kept. A reply
// refused permanently (5xx, a bad address) is logged and the mail is
// marked anyway. A text the Handler refuses for good (an error wrapping
// transports.ErrPermanent: more envelopes than the relay takes at once)
// is logged, replaced by a notice naming the mail, which the Handler
// gets instead, and the mail is marked: later mail does not wait behind
// it.
//
// Mail larger than Options.MaxMessageSize (8 MiB, the relay's intake
// limit) is not fetched: the Handler gets a short text naming it
// ("E-TOO-LARGE", Message-ID, From, Subject, Date) and no envelope, so the
// relay records a notice (and the sender of crosstalk mail hears back);
// the mail itself stays in the mailbox, marked, for a human.
//
// # Nothing twice, nothing skipped
//
// The state file (Options.StateFile, JSON, written temp + fsync +
// rename) holds the mailbox's UIDVALIDITY, the highest UID up to which
// every mail is processed, and the Message-IDs of the last 1024 processed
// mails. A restart continues after that UID. The server-side keyword is a
// second guard: mail carrying it is never offered again, even with a lost
// state file. When UIDVALIDITY changes (the mailbox was recreated or
// restored), UIDs are meaningless: the Receiver scans the whole mailbox
// again and skips mail that carries the keyword or a remembered
// Message-ID. Whatever still gets offered twice (a crash between the
// Handler's success and the flag) is harmless: the relay de-duplicates by
// envelope message id (docs/design.md §5.3), and at worst a receipt is mailed
// twice. A mail with a Message-ID seen before — a Sender's retry after an
// unclear failure — is marked without being offered again.
//
// # What it does not do
//
// It does not parse or check envelopes (the relay does), retry sends (the
// relay's outbound dispatcher does), or host a mail server. It does not
// add the spec's "meta: email" block to envelopes: a relay never edits a
// signed envelope (docs/design.md §4.2), so Message-ID and In-Reply-To live in the
// mail headers only. DSNs (bounces) are not parsed for the failed
// envelope; they reach the Handler as text without envelope.
package mail
