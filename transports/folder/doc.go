// Package folder is the watched-folder binding of the envelope protocol
// (docs/design.md §5.5, spec "Transport Bindings"): a Receiver that picks up
// `*.crosstalk` and `*.aict` files dropped into a directory, and a Sender
// that writes envelopes to `outbox/<receiver>/<message>.crosstalk`.
//
// # Receiving
//
// Folder.Receive watches the directory with fsnotify and rescans it
// periodically (Options.Rescan), so files present at start and events the
// kernel dropped are found too. Only regular files at the top level whose
// names end in .crosstalk or .aict (any case) are considered; names that
// start with a dot (editors' temp and lock files, and this package's own)
// are ignored, as are subdirectories.
//
// A file is read only when it is complete: its last non-blank line — after
// any closing ``` or ~~~ fence lines — is a column-0 `[[END]]` (a one-level
// "> " quote prefix is allowed, as the envelope Reader allows it), the
// Reader finds every envelope in it terminated, and its size and
// modification time have not changed for Options.Settle. An editor's
// rename-save (temp file, then rename into place) and a slow writer that
// appends in pieces are both handled by that rule. A file that stays
// incomplete and unchanged for Options.Timeout is given up on.
// A file that waits is looked at less often the longer it stays quiet
// (after half its quiet time, at most one Options.Rescan apart), so a
// folder holding many incomplete files does not keep a CPU busy; a
// change notification has it looked at again at once, and without
// notifications a change is seen within one rescan interval.
//
// A complete file's whole text goes to the Handler in one Inbound
// (Transport "folder", Source the file's path, CanReply false). What
// happens next:
//
//   - the Handler returns an error wrapping transports.ErrPermanent
//     (the relay refuses a file with too many envelopes whole): the file
//     moves to failed/ with the error as its reason;
//   - the Handler returns another error: nothing was recorded, the file stays
//     where it is and is offered again after a backoff (1 s doubling to
//     1 min), and after a restart;
//   - the Handler returns nil: the file moves to processed/ — unless every
//     envelope in it was rejected, then it moves to failed/. The Handler's
//     reply decides when it holds envelopes, even though a folder has no
//     way back: receipts (ACK for a recorded envelope, ERROR for a
//     rejected one), or the ERROR envelopes alone, as gateway.Relay.Handler
//     returns them — then every envelope was rejected when there are as
//     many as the file holds. Without a reply the file's own parse decides
//     (no envelope that parsed means rejected). When some but not all
//     envelopes were
//     rejected the file moves to processed/ with NAME.error beside it
//     listing the rejected ones.
//
// A file that changed while the Handler ran (a writer appended to it) is
// not moved: it is offered again, whole, once it settles, and the relay's
// de-duplication by message id records only what is new. A writer that
// keeps the file open and appends in the instant between that check and
// the move is caught after the move: the moved file is handed over again
// (up to ten times) until it stays as it was handled.
//
// A file is refused without calling the Handler — moved to failed/ with
// NAME.error saying why — when it is a symbolic link (never followed,
// wherever it points), not a regular file, has more than one hard link
// (a way to smuggle in a file from outside the directory), is larger than
// MaxFileSize, has an unsafe name (control characters — the Unicode line
// separators and bidirectional overrides and isolates among them —
// invalid UTF-8, a backslash or ".."), or never completes. A name that already exists in
// processed/ or failed/ gets a numeric suffix ("a.crosstalk" becomes
// "a-1.crosstalk"); nothing is ever overwritten there. A name too long to
// take that suffix and the .error file within 255 bytes is shortened (its
// start, "~", a hash of the whole name, its extension); the .error file
// keeps the original name. An error looking for a free name other than
// "does not exist" is an error, never taken for "the name is taken".
//
// The state that makes restarts safe is the file system itself: a file is
// moved away only after the Handler returned nil, so a file still in the
// directory after a crash is offered again, and the relay's
// de-duplication by message id makes that harmless.
//
// # Sending
//
// Folder.Send writes the text to `<outbox>/<receiver>/<message>.crosstalk`
// (outbox is DIR/outbox unless Options.Outbox says otherwise) through a
// hidden temp file in the same directory, fsync and rename, so a reader
// never sees a partial file. Receiver and message id are turned into safe
// file names: characters other than ASCII letters, digits and "-_.@+="
// become "_", a leading dot becomes "_", names are at most 64 bytes, and a
// name that had to be changed gets a short hash of the original appended
// so that two different ids never share a file. The same message id
// overwrites the same file, which makes Send idempotent.
//
// # What it does not do
//
// It does not parse envelopes for the Handler (the text goes as it is),
// retry Sends (the relay's outbound dispatcher does), watch
// subdirectories, or coordinate two Receivers on one directory: run one
// per directory.
package folder
