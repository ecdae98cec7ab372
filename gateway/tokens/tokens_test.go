package tokens_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/tokens"
)

func TestStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", tokens.FileName)
	s := tokens.Open(path)
	if p, ok := s.Lookup("ctk_nothing"); ok {
		t.Fatalf("empty store knows a token: %q", p)
	}
	secret, tok, err := s.New("user")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, tokens.Prefix) || len(secret) < 40 || tok.Principal != "user" || tok.ID == "" {
		t.Fatalf("New = %q, %+v", secret, tok)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), secret) || strings.Contains(string(data), strings.TrimPrefix(secret, tokens.Prefix)) {
		t.Fatal("the secret is stored in the file")
	}
	if p, ok := s.Lookup(secret); !ok || p != "user" {
		t.Fatalf("Lookup(secret) = %q, %v", p, ok)
	}
	for _, bad := range []string{"", secret + "x", secret[:len(secret)-1], strings.ToUpper(secret), "Bearer " + secret} {
		if _, ok := s.Lookup(bad); ok {
			t.Errorf("Lookup(%q) accepted", bad)
		}
	}

	// Another process (another Store on the same file) sees it at once,
	// and sees a revocation at once.
	other := tokens.Open(path)
	if p, ok := other.Lookup(secret); !ok || p != "user" {
		t.Fatalf("other store: Lookup = %q, %v", p, ok)
	}
	secret2, tok2, err := other.New("claude")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.Lookup(secret2); !ok || p != "claude" {
		t.Fatalf("a token minted elsewhere: Lookup = %q, %v", p, ok)
	}
	list, err := s.List()
	if err != nil || len(list) != 2 || list[0].ID != tok.ID || list[1].ID != tok2.ID {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if _, err := other.Revoke(tok.ID[:6]); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup(secret); ok {
		t.Fatal("a revoked token still works")
	}
	if _, err := s.Revoke(tok.ID); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("Revoke again = %v, want ErrNotFound", err)
	}
	if _, err := s.Revoke("ab"); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("Revoke(short prefix) = %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", " ", "two words", "a\nb", strings.Repeat("x", 129)} {
		if _, _, err := s.New(bad); !errors.Is(err, tokens.ErrPrincipal) {
			t.Errorf("New(%q) = %v, want ErrPrincipal", bad, err)
		}
	}
}

func TestStoreBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), tokens.FileName)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := tokens.Open(path)
	if _, err := s.List(); err == nil {
		t.Error("List of a corrupt file: no error")
	}
	if _, _, err := s.New("user"); err == nil {
		t.Error("New over a corrupt file: no error (it would drop the tokens)")
	}
}

func TestStoreConcurrent(t *testing.T) {
	s := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	var wg sync.WaitGroup
	secrets := make([]string, 20)
	for i := range secrets {
		wg.Go(func() {
			sec, _, err := s.New("user")
			if err != nil {
				t.Error(err)
			}
			secrets[i] = sec
			s.Lookup(sec)
		})
	}
	wg.Wait()
	for _, sec := range secrets {
		if _, ok := s.Lookup(sec); !ok {
			t.Errorf("token %q lost", sec)
		}
	}
}

// TestNewPrincipalLookalike: New, which every way of minting goes
// through, refuses a principal that would show as another's name (an
// invisible, bidi or non-ASCII space character) and stores an NFD one in
// NFC, the form senders are compared in.
func TestNewPrincipalLookalike(t *testing.T) {
	s := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	for _, p := range []string{"ali\u200bce", "alice\u202e", "\u2060alice", "ali\u00adce", "al\u00a0ice", "ali\u3000ce"} {
		if _, _, err := s.New(p); !errors.Is(err, tokens.ErrPrincipal) {
			t.Errorf("New(%q) = %v, want tokens.ErrPrincipal", p, err)
		}
	}
	_, tok, err := s.New("cafe\u0301")
	if err != nil || tok.Principal != "caf\u00e9" {
		t.Errorf("New(NFD) = %q, %v; want the NFC name", tok.Principal, err)
	}
	if list, _ := s.List(); len(list) != 1 {
		t.Errorf("List() = %v, want only the NFC one", list)
	}
}

// TestNewPrincipalFoldsLikeAnother: the relay tells principals apart
// with strings.EqualFold, so a token for ſam (long s) or SAM acted as the
// holder of sam's: a second spelling that folds alike is refused, the
// same spelling again is not.
func TestNewPrincipalFoldsLikeAnother(t *testing.T) {
	s := tokens.Open(filepath.Join(t.TempDir(), tokens.FileName))
	if _, _, err := s.New("sam"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"\u017fam", "SAM", "Sam"} {
		if _, _, err := s.New(p); !errors.Is(err, tokens.ErrPrincipal) || !strings.Contains(err.Error(), `"sam"`) {
			t.Errorf("New(%q) after sam = %v, want tokens.ErrPrincipal naming sam", p, err)
		}
	}
	if _, _, err := s.New("sam"); err != nil {
		t.Errorf("a second token for sam: %v", err)
	}
	if list, _ := s.List(); len(list) != 2 {
		t.Errorf("List() = %v, want sam's two tokens", list)
	}
}

// TestConcurrentStores: writers each with their own Store on one file, as
// the relay (the web inbox minting) and `crosstalk token` are, never lose
// each other's changes — above all, a revocation is never undone by a
// mint that read the file before it.
func TestConcurrentStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), tokens.FileName)
	const writers, each = 8, 8
	var wg sync.WaitGroup
	mint := func() {
		defer wg.Done()
		s := tokens.Open(path)
		for range each {
			if _, _, err := s.New("user"); err != nil {
				t.Error(err)
			}
		}
	}
	for range writers {
		wg.Add(1)
		go mint()
	}
	wg.Wait()
	if list, err := tokens.Open(path).List(); err != nil || len(list) != writers*each {
		t.Fatalf("after %d concurrent mints the store holds %d tokens (%v)", writers*each, len(list), err)
	}
	// Revocations racing mints: every revoked token stays revoked.
	list, _ := tokens.Open(path).List()
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			s := tokens.Open(path)
			for i := 0; i < each; i++ {
				if _, err := s.Revoke(list[w*each+i].ID); err != nil {
					t.Error(err)
				}
			}
		}()
		go mint()
	}
	wg.Wait()
	after, err := tokens.Open(path).List()
	if err != nil || len(after) != writers*each {
		t.Fatalf("after revoking %d and minting %d the store holds %d tokens (%v)", writers*each, writers*each, len(after), err)
	}
	gone := map[string]bool{}
	for _, tk := range list {
		gone[tk.ID] = true
	}
	for _, tk := range after {
		if gone[tk.ID] {
			t.Errorf("revoked token %s is back", tk.ID)
		}
	}
}
