// Package clipboard is the clipboard binding of the envelope protocol
// (docs/design.md §5.5): a Receiver that polls the system clipboard and hands new
// text holding an envelope header to the relay, and a Sender that places
// an envelope on the clipboard for a human to paste into a chat.
//
// # Reading with a bound
//
// A clipboard can hold anything, including 100 MB of text, and
// github.com/atotto/clipboard reads all of it into memory. So on Linux and
// the BSDs this package runs the clipboard tool itself and reads at most
// Options.MaxSize bytes (MaxSize, 8 MiB, the relay's intake limit, by
// default) through an io.LimitReader; a larger clipboard gives ErrTooLarge
// (Receive logs one notice per such clipboard and keeps watching) and the
// tool is killed. The tool is chosen at every call, so DISPLAY may change
// while the program runs:
//
//   - wl-paste/wl-copy when WAYLAND_DISPLAY is set and both are installed;
//   - else xclip, else xsel, when DISPLAY is set (the CLIPBOARD selection,
//     not PRIMARY);
//   - pbpaste/pbcopy on macOS;
//   - atotto/clipboard elsewhere (Windows, Termux), where the bound is
//     checked only after the read.
//
// Without a tool or a display every call fails with an error wrapping
// ErrUnavailable that says what to install or set, e.g. "clipboard: no
// clipboard tool: install xclip or xsel, and run under X11 (DISPLAY is
// empty)". An empty clipboard (xclip's "target STRING not available",
// wl-paste's "No selection") reads as empty text, not an error.
//
// # Receiving
//
// Receive polls every Options.Interval. Text that changed since the last
// poll, contains an envelope header (a Reader finds an envelope or a
// malformed one) and was neither placed there by this package nor handed
// over before is given to the Handler as one Inbound (Transport and Source
// "clipboard", CanReply false: the reply is never written over the user's
// clipboard, but rejections in it are logged). Text is compared by the
// SHA-256 of its bytes with trailing white space removed.
//
// What counts as "handed over before" and "placed by this package" is a
// list of recent hashes kept in memory and, when Options.StateFile is set,
// in that file, shared by every process using it (`crosstalk clip copy`
// and `crosstalk clip watch` share one), so a restart does not ingest the
// same clipboard again and `clip watch` never ingests what `clip copy`
// placed. The file keeps the last 256 entries. Without a state file, a
// new Receive offers the text already on the clipboard when it starts.
//
// When the Handler fails, the text counts as new and is offered again
// after a backoff (Interval doubling to 30 s), also after a restart, as
// long as it stays on the clipboard: the clipboard has one slot, so text
// replaced before the relay recorded it is lost with the copy that
// replaced it. That is the one thing this transport cannot guarantee.
//
// # Sending
//
// Send places the envelope text on the clipboard exactly as given (signed
// envelopes are never re-serialized), optionally inside a ``` fence chosen
// like envelope.Writer's (Options.Fence), and remembers its hash first.
// The receiver and message id are not used: the clipboard has one slot.
//
// # What it does not do
//
// It does not read the PRIMARY selection, images or other targets, parse
// envelopes for the Handler, or watch several clipboards at once.
package clipboard
