package signing

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/internal/filelock"
)

// KeySource says where a key came from (docs/signing.md §5).
type KeySource string

// Key sources. The trust store records tofu, dns and manual; a Result may
// also say explicit (a key given to the Verifier).
const (
	SourceTOFU     KeySource = "tofu"     // pinned on first use from a signed announcement
	SourceDNS      KeySource = "dns"      // published in DNS (docs/design.md §4.3)
	SourceManual   KeySource = "manual"   // added or re-pinned by the user
	SourceExplicit KeySource = "explicit" // given for this verification only (verify --key)
)

// TrustEntry is one line of the trust store: the key pinned for a key id.
type TrustEntry struct {
	Key       *PublicKey // Key.Pkid is the entry's key id
	Source    KeySource
	FirstSeen time.Time
	Revoked   bool
	// Sender is the envelope sender the key was first seen from, if
	// known. A bare JWS (no key id) is tried against the keys of its
	// sender. The relay reads it as the key's holder (docs/security.md),
	// so only the relay's own first uses (PinFirstUse) record it.
	Sender string
	// Seen is the header's sender of the envelope a Verifier pinned the
	// key from on its own (crosstalk verify, a pasted text): a bare JWS
	// from that sender is tried against the key too, but Seen, an
	// unauthenticated header, names nobody as the key's holder.
	Seen string
}

// TrustStore is the known-keys file (docs/design.md §4.3), like ssh's known_hosts:
// one line per key id,
//
//	pkid alg key source first-seen state [sender=ADDRESS] [seen=ADDRESS]
//
// with state `active` or `revoked`, the key in unpadded base64url,
// first-seen in RFC 3339 and each ADDRESS percent-encoded; `#` comments and blank
// lines are kept when the file is rewritten. A missing file is an empty
// store.
//
// Every change takes an exclusive lock on path+".lock" (flock on Unix),
// reads the file, writes a temporary file next to it, syncs it and renames
// it over the old one, so concurrent writers — goroutines or processes —
// never lose each other's changes and readers never see half a file. A
// TrustStore is safe for concurrent use.
type TrustStore struct {
	path string
	// Now returns the current time for first-seen stamps; nil means
	// time.Now. Set it before first use.
	Now func() time.Time
	// OnBadFile, when set, makes readers (Entries, Lookup, a Verifier)
	// go on with the last version of the file they read — an absent file
	// reads as empty — when the file turns unreadable or malformed,
	// instead of failing: a long-running process (the relay) keeps its
	// pins and revocations while someone fixes a hand edit. OnBadFile is
	// called with the error (ErrTrustStore, naming the file) once for
	// each new error, and with nil once the file reads well again.
	// Readers with no good read before fail as without it; writers
	// always fail on a bad file. Set it before first use.
	OnBadFile func(err error)

	mu sync.Mutex // orders this process's writers before the file lock

	cacheMu    sync.Mutex
	cached     *storeFile  // last parse of the file, for readers
	cachedInfo os.FileInfo // the file as it was when cached was parsed
	// checkedAt is when (since trustEpoch) the stat that last found
	// cached current started; 0 after this store wrote the file.
	checkedAt time.Duration
	writes    uint64     // the changes this store wrote, for readers that raced one
	lastGood  *storeFile // last good read, for OnBadFile
	badErr    string     // the error last given to OnBadFile, "" when none

	mem *storeFile // the store's content when it lives in memory (NewMemoryTrustStore)
}

// NewTrustStore returns the store kept in the file at path. Nothing is
// read or created until it is used.
func NewTrustStore(path string) *TrustStore { return &TrustStore{path: path} }

// NewMemoryTrustStore returns a store that lives in memory, starting from
// data in the file format of TrustStore (nil is an empty store). It is for
// places without a file system, such as the browser extension's
// WebAssembly verifier (transports/browser), which keeps the text in the
// browser's storage: Bytes returns it after a change. Path returns "".
func NewMemoryTrustStore(data []byte) (*TrustStore, error) {
	f, err := parseStore(data)
	if err != nil {
		return nil, err
	}
	return &TrustStore{mem: f}, nil
}

// Bytes returns the store's content in its file format: for a store in
// memory, what it holds now; for a file, the file as it is now.
func (s *TrustStore) Bytes() ([]byte, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	return f.render(), nil
}

// Path returns the file the store is kept in.
func (s *TrustStore) Path() string { return s.path }

func (s *TrustStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Entries returns every entry, in file order.
func (s *TrustStore) Entries() ([]TrustEntry, error) {
	return s.matching(func(*TrustEntry) bool { return true })
}

// matching returns copies of the entries keep accepts, in file order,
// and copies nothing else: the Verifier looks for one key id among all the
// pins for every envelope it checks.
func (s *TrustStore) matching(keep func(*TrustEntry) bool) ([]TrustEntry, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	return f.matching(keep), nil
}

// matching is TrustStore.matching on a parsed file.
func (f *storeFile) matching(keep func(*TrustEntry) bool) []TrustEntry {
	var out []TrustEntry
	for _, l := range f.lines {
		if l.entry != nil && keep(l.entry) {
			out = append(out, l.entry.clone())
		}
	}
	return out
}

// pinnedFor returns a copy of the entry for key id pkid, if there is one.
func (s *TrustStore) pinnedFor(pkid string) ([]TrustEntry, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	return f.pinnedFor(pkid), nil
}

// pinnedFor is TrustStore.pinnedFor on a parsed file.
func (f *storeFile) pinnedFor(pkid string) []TrustEntry {
	if e := f.withPkid(pkid); e != nil {
		return []TrustEntry{e.clone()}
	}
	return nil
}

// revokedKey returns the entry that revokes k under any key id, if any.
func (s *TrustStore) revokedKey(k *PublicKey) (TrustEntry, bool, error) {
	f, err := s.read()
	if err != nil {
		return TrustEntry{}, false, err
	}
	if e := f.revokedKey(k); e != nil {
		return e.clone(), true, nil
	}
	return TrustEntry{}, false, nil
}

// Lookup returns the entry for pkid and whether there is one.
func (s *TrustStore) Lookup(pkid string) (TrustEntry, bool, error) {
	f, err := s.read()
	if err != nil {
		return TrustEntry{}, false, err
	}
	if e := f.withPkid(pkid); e != nil {
		return e.clone(), true, nil
	}
	return TrustEntry{}, false, nil
}

// MaxFirstUsePins bounds the keys that first use (PinFirstUse, and the
// Verifier's first uses and DNS pins) pins for one sender, revoked ones
// included; the keys it holds (sender=) and the keys seen in its name
// (seen=, PinFirstUseSeen) are counted apart, so that pins a stranger
// mails in a sender's name never use up the sender's own. A sender that rotates
// its key stays far below it, and a sender announcing a new key id with
// every envelope cannot grow the store — which every pin rewrites, and a
// bare JWS searches by sender — without bound. Pins by hand (Add, Pin)
// are not limited; removing entries (Remove) makes room.
const MaxFirstUsePins = 32

// MaxSeenPins bounds the keys pinned as seen (PinFirstUseSeen) over all
// senders together: mail lets anyone write in any sender's name, so the
// per-sender bound alone would let a stranger grow the store by mailing
// under ever new names. Past it, a first use seen by mail is refused
// with ErrTooManyPins until seen pins are removed (crosstalk trust
// remove) or a key is pinned by hand.
const MaxSeenPins = 1024

// seenPinsLimit is MaxSeenPins; tests lower it.
var seenPinsLimit = MaxSeenPins

// PinFirstUse pins key for key.Pkid unless a key is already pinned for it
// (trust on first use). It returns the entry now in the store: the new
// one, or the existing one when it holds the same key. A different pinned
// key gives ErrKeyChanged. A key revoked under another key id is pinned
// nowhere: the entry returned is that revocation (Revoked set).
func (s *TrustStore) PinFirstUse(key *PublicKey, source KeySource, sender string) (TrustEntry, error) {
	return s.pinFirstUse(key, source, sender, "")
}

// PinFirstUseSeen is PinFirstUse recording sender as seen (TrustEntry.Seen)
// instead of as the key's holder: the first use came from a medium that
// does not authenticate the sender (mail), so it proves nothing about who
// holds the key. MaxFirstUsePins bounds these pins for sender too, counted
// apart from the ones it holds.
func (s *TrustStore) PinFirstUseSeen(key *PublicKey, source KeySource, sender string) (TrustEntry, error) {
	return s.pinFirstUse(key, source, "", sender)
}

// pinFirstUse is PinFirstUse recording sender or seen (TrustEntry).
func (s *TrustStore) pinFirstUse(key *PublicKey, source KeySource, sender, seen string) (TrustEntry, error) {
	var got TrustEntry
	if err := checkStoreKey(key); err != nil {
		return got, err
	}
	switch source {
	case SourceTOFU, SourceDNS, SourceManual:
	default:
		return got, fmt.Errorf("signing: trust store: source %q (want tofu, dns or manual)", source)
	}
	err := s.update(func(f *storeFile) error {
		if e := f.find(key.Pkid); e != nil {
			if !e.Key.Equal(key) {
				return fmt.Errorf("%w: %s is pinned to %s, not %s", ErrKeyChanged, key.Pkid, e.Key.Fingerprint(), key.Fingerprint())
			}
			got = e.clone()
			return errNoChange
		}
		if r := f.revokedKeyScan(key); r != nil {
			// Revoked under another key id: pinned nowhere, reported
			// revoked (the caller's entry.Revoked).
			got = r.clone()
			return errNoChange
		}
		if who := cmp.Or(sender, seen); who != "" && f.firstUsePins(who, sender == "") >= MaxFirstUsePins {
			return fmt.Errorf("%w: %s already has %d; remove old ones (crosstalk trust remove) or pin this one by hand", ErrTooManyPins, who, MaxFirstUsePins)
		}
		if seen != "" && f.seenPins() >= seenPinsLimit {
			return fmt.Errorf("%w: the store already holds %d keys first seen by mail, in any sender's name; remove old ones (crosstalk trust remove) or pin this one by hand", ErrTooManyPins, seenPinsLimit)
		}
		e := &TrustEntry{Key: key, Source: source, FirstSeen: s.now().UTC().Truncate(time.Second), Sender: sender, Seen: seen}
		f.add(e)
		got = e.clone()
		return nil
	})
	return got, err
}

// Add pins key for key.Pkid by hand (source manual). If the key id is
// pinned to another key it fails with ErrKeyChanged: use Pin to replace a
// key. Adding the key already pinned changes nothing.
func (s *TrustStore) Add(key *PublicKey) error {
	if err := checkStoreKey(key); err != nil {
		return err
	}
	return s.update(func(f *storeFile) error {
		if e := f.find(key.Pkid); e != nil {
			if !e.Key.Equal(key) {
				return fmt.Errorf("%w: %s is pinned to %s (use pin to replace it)", ErrKeyChanged, key.Pkid, e.Key.Fingerprint())
			}
			return errNoChange
		}
		f.add(&TrustEntry{Key: key, Source: SourceManual, FirstSeen: s.now().UTC().Truncate(time.Second)})
		return nil
	})
}

// Pin pins key for key.Pkid by hand, replacing whatever was pinned (the
// user's answer to key-changed); whom the old key was first seen from
// (Sender, Seen) carries over to the new one. Re-pinning a key that was revoked for
// this key id fails with ErrRevoked: revocation is permanent; Remove the
// entry first to undo it on purpose.
func (s *TrustStore) Pin(key *PublicKey) error {
	if err := checkStoreKey(key); err != nil {
		return err
	}
	return s.update(func(f *storeFile) error {
		e := &TrustEntry{Key: key, Source: SourceManual, FirstSeen: s.now().UTC().Truncate(time.Second)}
		if old := f.find(key.Pkid); old != nil {
			if old.Revoked && old.Key.Equal(key) {
				return fmt.Errorf("%w: %s %s was revoked; remove the entry first to trust it again", ErrRevoked, key.Pkid, key.Fingerprint())
			}
			e.Sender, e.Seen = old.Sender, old.Seen
			f.replace(key.Pkid, e)
			return nil
		}
		f.add(e)
		return nil
	})
}

// Remove deletes the entry for pkid; ErrUnknownKey if there is none.
func (s *TrustStore) Remove(pkid string) error {
	return s.update(func(f *storeFile) error {
		if f.find(pkid) == nil {
			return fmt.Errorf("%w %q", ErrUnknownKey, pkid)
		}
		f.replace(pkid, nil)
		return nil
	})
}

// Revoke marks the key of pkid revoked: signatures by it verify as
// revoked from now on. With key nil the pinned key is revoked
// (ErrUnknownKey if none). With a key, an unknown pkid gets a revoked entry
// for that key (so it is never pinned later), and a pkid pinned to another
// key fails with ErrKeyChanged.
func (s *TrustStore) Revoke(pkid string, key *PublicKey) error {
	// The looser rule: an entry of a store written before checkPkid's
	// can be revoked too.
	if err := checkStoredPkid(pkid); err != nil {
		return err
	}
	if key != nil && key.Alg() == "" {
		return fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, key.Key)
	}
	return s.update(func(f *storeFile) error {
		e := f.find(pkid)
		switch {
		case e == nil && key == nil:
			return fmt.Errorf("%w %q", ErrUnknownKey, pkid)
		case e == nil:
			k := *key
			k.Pkid = pkid
			f.add(&TrustEntry{Key: &k, Source: SourceManual, FirstSeen: s.now().UTC().Truncate(time.Second), Revoked: true})
			return nil
		case key != nil && !e.Key.Equal(key):
			return fmt.Errorf("%w: %s is pinned to %s, not %s", ErrKeyChanged, pkid, e.Key.Fingerprint(), key.Fingerprint())
		case e.Revoked:
			return errNoChange
		}
		e.Revoked = true
		return nil
	})
}

// checkStoreKey reports a key that cannot go into the store: nil, of no
// supported type, or with a key id that would break the line format.
func checkStoreKey(key *PublicKey) error {
	if key == nil {
		return errors.New("signing: trust store: nil key")
	}
	if key.Alg() == "" {
		return fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, key.Key)
	}
	return checkPkid(key.Pkid)
}

// errNoChange tells update that fn changed nothing: no write.
var errNoChange = errors.New("no change")

// update runs fn on the current file under the lock and writes the result.
func (s *TrustStore) update(fn func(*storeFile) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem != nil {
		f := &storeFile{lines: append([]storeLine(nil), s.mem.lines...)}
		for i, l := range f.lines {
			if l.entry != nil {
				e := l.entry.clone()
				f.lines[i].entry = &e
			}
		}
		if err := fn(f); err != nil {
			if err == errNoChange {
				return nil
			}
			return err
		}
		s.cacheMu.Lock()
		s.mem = f
		s.cacheMu.Unlock()
		return nil
	}
	if dir := filepath.Dir(s.path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("signing: trust store: %w", err)
		}
	}
	// Through a symlink (a user's known_keys linked to the relay's
	// trust_file), lock and replace the file it names, which the other
	// processes read: a rename over the link would give this path a file
	// of its own, and a revocation here would never reach them.
	path := s.path
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	} else {
		path = linkTarget(path) // a link to a file not written yet
	}
	unlock, err := filelock.Lock(path + ".lock")
	if err != nil {
		return fmt.Errorf("signing: trust store: locking: %w", err)
	}
	defer unlock()
	f, err := s.readLocked()
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		if err == errNoChange {
			return nil
		}
		return err
	}
	if err := writeAtomic(path, f.render()); err != nil {
		return err
	}
	s.cacheMu.Lock()
	s.lastGood = f  // what this store wrote is good, whatever readers saw
	s.checkedAt = 0 // its readers see the change at once
	s.writes++
	s.cacheMu.Unlock()
	return nil
}

// read returns the parsed file for readers (Entries, Lookup), reusing the
// last parse while the file's identity, size and modification time are
// unchanged: the relay verifies every envelope against the store, and
// re-parsing the file each time cost more than the signature check's
// overhead budget (docs/performance.md). Every writer of this package
// replaces the file by rename, which gives it a new identity, so a change
// written by another process — a revocation — counts at the first read
// that starts restatAfter after it, even within the modification time's
// granularity; a change this store wrote, at the next read. Readers need
// no lock and never modify the returned file; writers always re-read
// under the lock (readLocked).
func (s *TrustStore) read() (*storeFile, error) {
	s.cacheMu.Lock()
	mem := s.mem
	s.cacheMu.Unlock()
	if mem != nil {
		return mem, nil
	}
	f, err := s.readCached()
	if s.OnBadFile == nil {
		return f, err
	}
	return s.orLastGood(f, err)
}

// orLastGood is read's answer under OnBadFile: f when err is nil, else
// the last good read, if any, after reporting err once.
func (s *TrustStore) orLastGood(f *storeFile, err error) (*storeFile, error) {
	s.cacheMu.Lock()
	if err == nil {
		s.lastGood = f
		recovered := s.badErr != ""
		s.badErr = ""
		s.cacheMu.Unlock()
		if recovered {
			s.OnBadFile(nil)
		}
		return f, nil
	}
	good := s.lastGood
	report := good != nil && err.Error() != s.badErr
	if good != nil {
		s.badErr = err.Error()
	}
	s.cacheMu.Unlock()
	if good == nil {
		return nil, err
	}
	if report {
		s.OnBadFile(err)
	}
	return good, nil
}

// restatAfter is how long a stat of the trust file that found its last
// parse current stands for the reads that start after it: a relay
// verifying thousands of envelopes a second stats the file once per
// restatAfter, not once per envelope (a system call, ~3 µs on a virtual
// machine). A change by another process counts that much later at most,
// which lets through nothing the signer could not have sent that much
// earlier, before the change.
const restatAfter = time.Millisecond

// trustEpoch is the origin of TrustStore.checkedAt: a monotonic clock.
var trustEpoch = time.Now()

// sinceEpoch is the time since trustEpoch (a variable so that tests can
// stop the clock), and afterParse, when not nil, runs between a reader's
// parse of the file and its storing the parse (tests interleave a write
// there).
var (
	sinceEpoch = func() time.Duration { return time.Since(trustEpoch) }
	afterParse func()
)

// readCached is read without OnBadFile.
func (s *TrustStore) readCached() (*storeFile, error) {
	now := sinceEpoch() + 1 // never 0, checkedAt's "wrote it"
	s.cacheMu.Lock()
	if s.cached != nil && s.checkedAt != 0 && now-s.checkedAt < restatAfter {
		f := s.cached
		s.cacheMu.Unlock()
		return f, nil
	}
	writes := s.writes
	s.cacheMu.Unlock()
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &storeFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTrustStore, err)
	}
	s.cacheMu.Lock()
	if s.cached != nil && os.SameFile(fi, s.cachedInfo) && fi.Size() == s.cachedInfo.Size() && fi.ModTime().Equal(s.cachedInfo.ModTime()) {
		f := s.cached
		if s.writes == writes { // else this stat may predate the write
			s.checkedAt = max(s.checkedAt, now)
		}
		s.cacheMu.Unlock()
		return f, nil
	}
	s.cacheMu.Unlock()
	f, err := s.readLocked()
	if err != nil {
		return nil, err
	}
	if afterParse != nil {
		afterParse()
	}
	s.cacheMu.Lock()
	// A write by this store since the stat: f may predate it, and a
	// reader that started after the write may have cached the change and
	// stamped checkedAt; f must replace neither (the caller still gets f,
	// since its read started before the write returned).
	if s.writes == writes {
		s.cached, s.cachedInfo = f, fi
		s.checkedAt = now
	}
	s.cacheMu.Unlock()
	return f, nil
}

// readLocked reads and parses the file without the cache; writers call it
// under the lock. A missing file is an empty store.
func (s *TrustStore) readLocked() (*storeFile, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &storeFile{}, nil
	}
	if err != nil {
		// "read FILE: is a directory", "open FILE: permission denied"
		return nil, fmt.Errorf("%w: %w", ErrTrustStore, err)
	}
	f, err := parseStore(data)
	if err != nil {
		return nil, within(err, "%s", s.path)
	}
	return f, nil
}

// linkTarget follows path while it is a symlink, to the path it finally
// names even when that does not exist yet (where filepath.EvalSymlinks
// fails), so that the first pin through a user's link to the relay's
// trust_file creates that file rather than replacing the link. A link
// it cannot read, or a loop, leaves the path as it got it.
func linkTarget(path string) string {
	p := path
	for range 40 { // as many links as Linux follows
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return p
		}
		t, err := os.Readlink(p)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		p = t
	}
	return path
}

// writeAtomic replaces path with data: temporary file in the same
// directory, fsync, rename, fsync of the directory.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("signing: trust store: %w", err)
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return fmt.Errorf("signing: trust store: writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return fmt.Errorf("signing: trust store: writing %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return fmt.Errorf("signing: trust store: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: not every system can sync a directory
		d.Close()
	}
	return nil
}

// storeFile is the parsed file: every line, comments kept.
type storeFile struct {
	lines []storeLine

	// byPkid indexes the entries by key id (unique in a file), and
	// revoked the revoked entries by key (rawKey), for readers (built on
	// first use: a parsed file readers see is never changed).
	byPkidOnce sync.Once
	byPkid     map[string]*TrustEntry
	revoked    map[string]*TrustEntry
}

// rawKey identifies a key whatever its key id: its algorithm and bytes.
func rawKey(k *PublicKey) string { return string(k.Alg()) + ":" + string(k.Bytes()) }

// revokedKey returns an entry that revokes k, under any key id, or nil.
// A key revoked under one key id is revoked under all: a sig line's
// pkid= is not signed, so anyone can re-label an envelope the revoked key
// signed with a key id that names no revocation (docs/signing.md §7).
// Readers only; a writer inside update scans (revokedKeyScan).
func (f *storeFile) revokedKey(k *PublicKey) *TrustEntry {
	f.index()
	if len(f.revoked) == 0 || k == nil {
		return nil
	}
	return f.revoked[rawKey(k)]
}

// revokedKeyScan is revokedKey for a file being changed (no index).
func (f *storeFile) revokedKeyScan(k *PublicKey) *TrustEntry {
	for _, l := range f.lines {
		if l.entry != nil && l.entry.Revoked && l.entry.Key.Equal(k) {
			return l.entry
		}
	}
	return nil
}

// withPkid returns the entry for pkid, or nil. The relay asks this for
// every envelope it verifies, so it is a map lookup, not a scan of a
// store that may hold thousands of pins.
func (f *storeFile) withPkid(pkid string) *TrustEntry {
	f.index()
	return f.byPkid[pkid]
}

// index builds byPkid and revoked once.
func (f *storeFile) index() {
	f.byPkidOnce.Do(func() {
		f.byPkid = make(map[string]*TrustEntry)
		for _, l := range f.lines {
			if l.entry != nil {
				f.byPkid[l.entry.Key.Pkid] = l.entry
				if l.entry.Revoked {
					if f.revoked == nil {
						f.revoked = make(map[string]*TrustEntry)
					}
					f.revoked[rawKey(l.entry.Key)] = l.entry
				}
			}
		}
	})
}

type storeLine struct {
	raw   string      // comment or blank line, verbatim
	entry *TrustEntry // or an entry
}

const storeHeader = `# crosstalk known keys (docs/signing.md §5). One line per key id:
# pkid alg key source first-seen state [sender=ADDRESS] [seen=ADDRESS]
`

func (e *TrustEntry) clone() TrustEntry {
	c := *e
	k := *e.Key
	c.Key = &k
	return c
}

// firstUsePins counts the entries first use pinned for sender: held by
// it (sender=), or seen from it (seen=) when seen is set.
func (f *storeFile) firstUsePins(sender string, seen bool) int {
	n := 0
	for _, l := range f.lines {
		if e := l.entry; e != nil && e.Source != SourceManual && (!seen && strings.EqualFold(e.Sender, sender) || seen && strings.EqualFold(e.Seen, sender)) {
			n++
		}
	}
	return n
}

// seenPins counts the pins that record a sender as seen (not manual).
func (f *storeFile) seenPins() int {
	n := 0
	for _, l := range f.lines {
		if e := l.entry; e != nil && e.Source != SourceManual && e.Seen != "" {
			n++
		}
	}
	return n
}

func (f *storeFile) find(pkid string) *TrustEntry {
	for _, l := range f.lines {
		if l.entry != nil && l.entry.Key.Pkid == pkid {
			return l.entry
		}
	}
	return nil
}

func (f *storeFile) add(e *TrustEntry) {
	if len(f.lines) == 0 {
		for _, h := range strings.SplitAfter(strings.TrimSuffix(storeHeader, "\n"), "\n") {
			f.lines = append(f.lines, storeLine{raw: strings.TrimSuffix(h, "\n")})
		}
	}
	f.lines = append(f.lines, storeLine{entry: e})
}

// replace puts e in place of pkid's entry; nil removes it.
func (f *storeFile) replace(pkid string, e *TrustEntry) {
	for i, l := range f.lines {
		if l.entry != nil && l.entry.Key.Pkid == pkid {
			if e == nil {
				f.lines = append(f.lines[:i], f.lines[i+1:]...)
			} else {
				f.lines[i].entry = e
			}
			return
		}
	}
}

func (f *storeFile) render() []byte {
	var b bytes.Buffer
	for _, l := range f.lines {
		if l.entry == nil {
			b.WriteString(l.raw)
			b.WriteByte('\n')
			continue
		}
		e := l.entry
		state := "active"
		if e.Revoked {
			state = "revoked"
		}
		// RFC3339Nano: a hand-edited fractional first-seen survives a
		// rewrite; the whole seconds this package writes print as before.
		fmt.Fprintf(&b, "%s %s %s %s %s %s", e.Key.Pkid, e.Key.Alg(), b64url(e.Key.Bytes()), e.Source, e.FirstSeen.UTC().Format(time.RFC3339Nano), state)
		if e.Sender != "" {
			b.WriteString(" sender=" + url.PathEscape(e.Sender))
		}
		if e.Seen != "" {
			b.WriteString(" seen=" + url.PathEscape(e.Seen))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// bom is the UTF-8 byte order mark some editors start a file with.
const bom = "\ufeff"

func parseStore(data []byte) (*storeFile, error) {
	// A store saved by such an editor: the mark is not part of the first
	// line (a rewrite drops it).
	data = bytes.TrimPrefix(data, []byte(bom))
	f := &storeFile{}
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	n := 0
	for sc.Scan() {
		n++
		// ScanLines drops one CR before the LF; drop them all, so a kept
		// comment or blank line renders to a line that reads back the same.
		raw := strings.TrimRight(sc.Text(), "\r")
		t := strings.TrimSpace(raw)
		if t == "" || strings.HasPrefix(t, "#") {
			f.lines = append(f.lines, storeLine{raw: raw})
			continue
		}
		e, err := parseEntry(t)
		if err != nil {
			return nil, withinKind(ErrTrustStore, err, "line %d", n)
		}
		if first, dup := seen[e.Key.Pkid]; dup {
			return nil, fmt.Errorf("%w: line %d: key id %q again (first on line %d)", ErrTrustStore, n, e.Key.Pkid, first)
		}
		seen[e.Key.Pkid] = n
		f.lines = append(f.lines, storeLine{entry: e})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d: longer than 64 KiB", ErrTrustStore, n+1)
		}
		return nil, fmt.Errorf("%w: %v", ErrTrustStore, err)
	}
	return f, nil
}

func parseEntry(t string) (*TrustEntry, error) {
	c := strings.Fields(t)
	if len(c) < 6 {
		return nil, fmt.Errorf("want `pkid alg key source first-seen state`, got %d fields", len(c))
	}
	alg, err := ParseAlg(c[1])
	if err != nil {
		return nil, fmt.Errorf("unknown algorithm %q", c[1])
	}
	raw, err := decodeB64(c[2])
	if err != nil {
		return nil, fmt.Errorf("key: %v", err)
	}
	// A key id pinned before checkPkid's rule still loads (checkStoredPkid);
	// no signature can name it any more.
	if err := checkStoredPkid(c[0]); err != nil {
		return nil, err
	}
	key, err := publicFromRaw(alg, "x", raw)
	if err != nil {
		return nil, err
	}
	key.Pkid = c[0]
	e := &TrustEntry{Key: key, Source: KeySource(c[3])}
	switch e.Source {
	case SourceTOFU, SourceDNS, SourceManual:
	default:
		return nil, fmt.Errorf("unknown source %q (want tofu, dns or manual)", c[3])
	}
	if e.FirstSeen, err = time.Parse(time.RFC3339, c[4]); err != nil {
		return nil, fmt.Errorf("first-seen %q is not an RFC 3339 time", c[4])
	}
	switch c[5] {
	case "active":
	case "revoked":
		e.Revoked = true
	default:
		return nil, fmt.Errorf("state %q (want active or revoked)", c[5])
	}
	for _, x := range c[6:] {
		k, v, _ := strings.Cut(x, "=")
		switch k {
		case "sender":
			if e.Sender, err = url.PathUnescape(v); err != nil {
				return nil, fmt.Errorf("sender: %v", err)
			}
		case "seen":
			if e.Seen, err = url.PathUnescape(v); err != nil {
				return nil, fmt.Errorf("seen: %v", err)
			}
		}
		// other key=value columns: from a newer version, ignored
	}
	return e, nil
}
