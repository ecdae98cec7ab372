package server

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/crosstalk-go/crosstalk/gateway/a2a"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/clipboard"
	"github.com/crosstalk-go/crosstalk/transports/folder"
	"github.com/crosstalk-go/crosstalk/transports/httpx"
	"github.com/crosstalk-go/crosstalk/transports/mail"
)

// FolderOptions is the watched folder transport (docs/transports.md).
type FolderOptions struct {
	// Inbox is the watched directory; DataDir/inbox when empty.
	Inbox string
	// Outbox is where envelopes for agents with transport "folder" are
	// written, one subdirectory per address; DataDir/outbox when empty.
	Outbox string
}

// ClipboardOptions is the clipboard transport. It always sends (to agents
// with transport "clipboard"); it receives only with Watch.
type ClipboardOptions struct {
	// Watch ingests envelopes copied to the clipboard.
	Watch bool
	// Fence wraps envelopes the relay copies in a ``` fence.
	Fence bool
	// StateFile remembers the texts seen and placed, shared with
	// `crosstalk clip` (clipboard.Options.StateFile).
	StateFile string
}

// MailOptions is the email transport: IMAP in, SMTP out; a nil server is
// off.
type MailOptions struct {
	IMAP, SMTP *mail.Server
	// Options are the transport's options; Logger is set by Open and
	// StateFile defaults to DataDir/mail-state.json.
	Options mail.Options
}

// transportSet is what Open runs: receivers feeding the relay and senders
// for the outbound dispatcher.
type transportSet struct {
	receivers map[string]transports.Receiver
	senders   map[string]transports.Sender
}

// buildTransports makes the transports of o.
func buildTransports(o *Options, log *slog.Logger) (*transportSet, error) {
	clip := clipboard.New(&clipboard.Options{Logger: log.With("transport", "clipboard"), Fence: o.Clipboard.Fence, StateFile: o.Clipboard.StateFile})
	ts := &transportSet{
		receivers: map[string]transports.Receiver{},
		senders: map[string]transports.Sender{
			"http":      httpx.Sender{Client: &httpx.Client{Retries: -1}},
			"a2a":       &a2a.Sender{}, // docs/agents.md, "A2A"
			"clipboard": clip,
		},
	}
	if o.Clipboard.Watch {
		ts.receivers["clipboard"] = clip
	}
	if f := o.Folder; f != nil {
		inbox, outbox := f.Inbox, f.Outbox
		if inbox == "" {
			inbox = filepath.Join(o.DataDir, "inbox")
		}
		if outbox == "" {
			outbox = filepath.Join(o.DataDir, "outbox")
		}
		for _, d := range []string{inbox, outbox} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return nil, fmt.Errorf("folder: %w", err)
			}
		}
		fo := folder.New(inbox, &folder.Options{Logger: log.With("transport", "folder"), Outbox: outbox})
		ts.receivers["folder"], ts.senders["folder"] = fo, fo
	}
	if m := o.Mail; m != nil {
		opts := m.Options
		opts.Logger = log.With("transport", "mail")
		if opts.StateFile == "" {
			opts.StateFile = filepath.Join(o.DataDir, "mail-state.json")
		}
		var sender *mail.Sender
		if m.SMTP != nil {
			s, err := mail.NewSender(*m.SMTP, &opts)
			if err != nil {
				return nil, err
			}
			sender = s
			ts.senders["mail"] = s
		}
		if m.IMAP != nil {
			r, err := mail.NewReceiver(*m.IMAP, sender, &opts)
			if err != nil {
				return nil, err
			}
			ts.receivers["mail"] = r
		}
	}
	for name, r := range o.Receivers {
		ts.receivers[name] = r
	}
	for name, s := range o.Senders {
		ts.senders[name] = s
	}
	return ts, nil
}
