// Package tokens keeps the bearer tokens minted at run time — by `crosstalk
// token new --principal NAME` or the web inbox's trust page — for the
// browser extension and other clients that cannot read the relay's config
// file (issue 17, docs/web.md "Tokens").
//
// A Store is one file in the relay's data directory (0600), holding for
// each token its id, principal, creation time and the SHA-256 of its
// secret; the secret itself is shown once, when it is minted, and never
// stored. The relay looks tokens up on every request with a bearer token
// and re-reads the file whenever it changed, so a token minted or revoked
// by another process counts at once, without a restart.
//
// It does not decide what a principal may do (package gateway/api does:
// docs/configuration.md) and does not replace the config file's tokens,
// which the relay accepts alongside these.
package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/internal/filelock"
)

// FileName is the store's file name in the relay's data directory.
const FileName = "tokens.json"

// Prefix starts every minted secret, so a leaked one is recognizable.
const Prefix = "ctk_"

// MaxTokens bounds the store: minting more fails.
const MaxTokens = 1000

// ErrNotFound: no token has the id given to Revoke.
var ErrNotFound = errors.New("tokens: no such token")

// ErrPrincipal: the principal given to New is empty, too long, or holds
// spaces or a character that hides or reorders text (the ones
// envelope.NormalizeIdentifier refuses).
var ErrPrincipal = errors.New("tokens: bad principal")

// Token is one minted token, without its secret.
type Token struct {
	ID        string    `json:"id"`
	Principal string    `json:"principal"`
	Created   time.Time `json:"created"`
	// SHA256 is the hex SHA-256 of the secret.
	SHA256 string `json:"sha256"`
}

type file struct {
	Tokens []Token `json:"tokens"`
}

// Store is the token file at a path. It is safe for concurrent use, and
// writers in several processes (the relay's web inbox, `crosstalk token`)
// take a lock on path+".lock" around each change, so none loses
// another's: a revocation is never undone by a mint.
type Store struct {
	path string
	// Now gives creation times; nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	cached []Token
	info   os.FileInfo // the file as it was when cached was read
}

// Open returns the store kept at path. Nothing is read or created until
// it is used; a missing file is an empty store.
func Open(path string) *Store { return &Store{path: path} }

// Path returns the store's file.
func (s *Store) Path() string { return s.path }

// New mints a token for principal and returns its secret, which is not
// stored and cannot be shown again. The principal is compared with
// senders' actor ids, so it is stored in NFC, and one holding a character
// a person cannot see or that reorders text is refused: it would show as
// another agent's name and match no sender. Every way of minting (the
// CLI, the web inbox) goes through here.
func (s *Store) New(principal string) (secret string, t Token, err error) {
	principal = strings.TrimSpace(principal)
	if principal == "" || len(principal) > 128 || strings.IndexFunc(principal, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "", Token{}, fmt.Errorf("%w %s: want a name without spaces, at most 128 bytes", ErrPrincipal, strconv.QuoteToASCII(principal))
	}
	if principal, err = envelope.NormalizeIdentifier(principal); err != nil {
		return "", Token{}, fmt.Errorf("%w: %v", ErrPrincipal, err)
	}
	var raw [32]byte
	var id [6]byte
	rand.Read(raw[:]) // never fails (crypto/rand)
	rand.Read(id[:])
	secret = Prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t = Token{ID: hex.EncodeToString(id[:]), Principal: principal, Created: now().UTC().Truncate(time.Second), SHA256: digest(secret)}
	err = s.update(func(f *file) error {
		if len(f.Tokens) >= MaxTokens {
			return fmt.Errorf("tokens: the store holds %d tokens already; revoke some", len(f.Tokens))
		}
		for _, o := range f.Tokens {
			// sam and ſam (long s) are two actors to the relay, which
			// compares principals with actor ids exactly, but one to the
			// attention rules, which match addressees with a case fold
			// (an envelope to ſAM is delivered to sam as to_me): two
			// principals there would read each other's mail.
			if o.Principal != principal && strings.EqualFold(o.Principal, principal) {
				return fmt.Errorf("%w %s: the relay takes it for %s, the principal of token %s; mint it under that spelling", ErrPrincipal, strconv.QuoteToASCII(principal), strconv.QuoteToASCII(o.Principal), o.ID)
			}
		}
		f.Tokens = append(f.Tokens, t)
		return nil
	})
	if err != nil {
		return "", Token{}, err
	}
	return secret, t, nil
}

// List returns every token, oldest first.
func (s *Store) List() ([]Token, error) {
	ts, err := s.load()
	return append([]Token(nil), ts...), err
}

// Revoke deletes the token with id (or a unique prefix of it of at least
// four characters); ErrNotFound if none.
func (s *Store) Revoke(id string) (Token, error) {
	var gone Token
	err := s.update(func(f *file) error {
		at := -1
		for i, t := range f.Tokens {
			if t.ID == id || len(id) >= 4 && strings.HasPrefix(t.ID, id) {
				if at >= 0 {
					return fmt.Errorf("tokens: %q names more than one token; give more of the id", id)
				}
				at = i
			}
		}
		if at < 0 {
			return fmt.Errorf("%w %q", ErrNotFound, id)
		}
		gone = f.Tokens[at]
		f.Tokens = append(f.Tokens[:at], f.Tokens[at+1:]...)
		return nil
	})
	return gone, err
}

// Lookup returns the principal of secret, comparing digests in constant
// time. It re-reads the file when it changed since the last read; a file
// it cannot read knows no token.
func (s *Store) Lookup(secret string) (principal string, ok bool) {
	if !strings.HasPrefix(secret, Prefix) {
		return "", false
	}
	ts, err := s.load()
	if err != nil {
		return "", false
	}
	d := []byte(digest(secret))
	for _, t := range ts {
		if subtle.ConstantTimeCompare([]byte(t.SHA256), d) == 1 {
			principal, ok = t.Principal, true
		}
	}
	return principal, ok
}

func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// load returns the tokens, re-reading the file when its identity, size or
// modification time changed. Writers replace the file by rename, so a
// change always gives a new identity.
func (s *Store) load() ([]Token, error) {
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.mu.Lock()
		s.cached, s.info = nil, nil
		s.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info != nil && os.SameFile(fi, s.info) && fi.Size() == s.info.Size() && fi.ModTime().Equal(s.info.ModTime()) {
		return s.cached, nil
	}
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cached, s.info = f.Tokens, fi
	return s.cached, nil
}

func (s *Store) read() (*file, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &file{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokens: %s: %w", s.path, err)
	}
	return &f, nil
}

// update applies fn to the file and writes it back, under the lock: a
// temporary file (0600) in the same directory, synced, renamed over the
// old one.
func (s *Store) update(fn func(*file) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	unlock, err := filelock.Lock(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("tokens: locking: %w", err)
	}
	defer unlock()
	f, err := s.read()
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(s.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	name := tmp.Name()
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, s.path) // CreateTemp made it 0600
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("tokens: writing %s: %w", s.path, err)
	}
	s.info = nil // the next load reads the new file
	return nil
}
