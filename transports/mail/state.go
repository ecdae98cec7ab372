package mail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// maxRemembered is how many Message-IDs the state file keeps (the most
// recent ones) for de-duplication after a UIDVALIDITY change.
const maxRemembered = 1024

// stateVersion is the state file's format version.
const stateVersion = 1

// state is what the Receiver remembers between runs, in a small JSON
// file:
//
//	{"version":1,"mailbox":"INBOX","uidvalidity":1700000000,"last_uid":42,
//	 "message_ids":["<01J…@example.org>", …]}
//
// last_uid is the highest UID up to which every mail is processed, under
// uidvalidity. When the server reports another UIDVALIDITY (the mailbox
// was recreated or restored), UIDs mean nothing any more: last_uid starts
// again from 0, and mail is skipped when it carries the processed keyword
// or one of the remembered Message-IDs.
type state struct {
	path string
	ids  map[string]bool

	Version     int      `json:"version"`
	Mailbox     string   `json:"mailbox"`
	UIDValidity uint32   `json:"uidvalidity"`
	LastUID     uint32   `json:"last_uid"`
	MessageIDs  []string `json:"message_ids"`
}

// loadState reads the state file; a missing file is a fresh start.
func loadState(path string) (*state, error) {
	st := &state{path: path, Version: stateVersion, ids: map[string]bool{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mail: state file: %w", err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		// Refuse rather than start over: starting over could process
		// every mail in the mailbox again (docs/design.md §5.5: nothing twice).
		return nil, fmt.Errorf("mail: state file %s is damaged (fix or remove it; processed mail carries its keyword either way): %w", path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("mail: state file %s: version %d, want %d", path, st.Version, stateVersion)
	}
	for _, id := range st.MessageIDs {
		st.ids[id] = true
	}
	return st, nil
}

// reset starts over for a mailbox with another identity.
func (st *state) reset(mailbox string, uidValidity uint32) {
	st.Mailbox, st.UIDValidity, st.LastUID = mailbox, uidValidity, 0
}

// seen reports whether a mail with this Message-ID was processed.
func (st *state) seen(msgID string) bool { return msgID != "" && st.ids[msgID] }

// done records a processed mail.
func (st *state) done(uid uint32, msgID string) {
	if uid > st.LastUID {
		st.LastUID = uid
	}
	if msgID == "" || st.ids[msgID] {
		return
	}
	st.ids[msgID] = true
	st.MessageIDs = append(st.MessageIDs, msgID)
	if n := len(st.MessageIDs) - maxRemembered; n > 0 {
		for _, id := range st.MessageIDs[:n] {
			delete(st.ids, id)
		}
		st.MessageIDs = append([]string(nil), st.MessageIDs[n:]...)
	}
}

// save writes the state durably: a temp file in the same directory,
// fsync, rename over the old file, fsync of the directory.
func (st *state) save() error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("mail: state file: %w", err)
	}
	dir := filepath.Dir(st.path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(st.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("mail: state file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, st.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mail: state file %s: %w", st.path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: not every file system syncs directories
		d.Close()
	}
	return nil
}
