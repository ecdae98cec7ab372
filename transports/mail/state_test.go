package mail

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	st, err := loadState(path)
	if err != nil || st.LastUID != 0 || st.UIDValidity != 0 {
		t.Fatalf("loadState(missing) = %+v, %v; want a fresh state", st, err)
	}
	st.reset("INBOX", 7)
	for i := 1; i <= maxRemembered+10; i++ {
		st.done(uint32(i), fmt.Sprintf("<%d@h>", i))
	}
	st.done(3, "") // an older UID never moves last_uid back
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
	st2, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if st2.UIDValidity != 7 || st2.LastUID != maxRemembered+10 || len(st2.MessageIDs) != maxRemembered {
		t.Errorf("reloaded state = uidvalidity %d last_uid %d, %d ids", st2.UIDValidity, st2.LastUID, len(st2.MessageIDs))
	}
	if st2.seen("<1@h>") || !st2.seen(fmt.Sprintf("<%d@h>", maxRemembered+10)) || st2.seen("") {
		t.Error("seen() remembers the wrong Message-IDs")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d files, want only the state file (no temp files left)", len(entries))
	}
}

// TestDamagedStateFile: a damaged state file stops Receive with a clear
// error instead of starting over (which could process everything again).
func TestDamagedStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := NewReceiver(Server{Addr: "127.0.0.1:1", Username: "u"}, nil, &Options{StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	err = rc.Receive(context.Background(), newRecorder().handle)
	if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.HasPrefix(err.Error(), "mail: ") {
		t.Errorf("Receive with a damaged state file = %v, want a 'damaged' error", err)
	}
}

func TestNewReceiverOptions(t *testing.T) {
	ok := Server{Addr: "h:143", Username: "u"}
	for _, tc := range []struct {
		srv  Server
		o    *Options
		want string
	}{
		{ok, nil, "StateFile is required"},
		{Server{Username: "u"}, &Options{StateFile: "s"}, "no IMAP server address"},
		{Server{Addr: "h:143"}, &Options{StateFile: "s"}, "username is required"},
		{ok, &Options{StateFile: "s", ProcessedKeyword: "\\Seen"}, "not an IMAP keyword"},
		{ok, &Options{StateFile: "s", ProcessedKeyword: "two words"}, "not an IMAP keyword"},
	} {
		if _, err := NewReceiver(tc.srv, nil, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewReceiver(%+v, %+v) = %v, want an error mentioning %q", tc.srv, tc.o, err, tc.want)
		}
	}
}

// TestDebugWriter: the raw SMTP traffic reaches Options.DebugWriter.
func TestDebugWriter(t *testing.T) {
	_, addr := startSMTP(t)
	var buf bytes.Buffer
	snd, err := NewSender(Server{Addr: addr}, &Options{From: "relay@example.test", DebugWriter: &buf})
	if err != nil {
		t.Fatal(err)
	}
	text, id := testEnvelope(t, "debug")
	if err := snd.Send(context.Background(), "bob@example.test", id, text); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte("MAIL FROM:<relay@example.test>")) {
		t.Errorf("DebugWriter got %q, want the SMTP dialogue", buf.String())
	}
}
