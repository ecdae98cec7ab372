package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/tokens"
)

// TestTokenCommands: crosstalk token new/list/revoke on a data dir, and a
// running relay over that data dir accepting a minted token from a browser
// extension's origin at once, then refusing it once revoked.
func TestTokenCommands(t *testing.T) {
	data := t.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen = data, "127.0.0.1:0"
	r, err := startRelay(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer r.shutdown()

	out, stderr, code := runCLI(t, "", "token", "new", "--data", data)
	secret := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(secret, tokens.Prefix) || !strings.Contains(stderr, `principal "user"`) {
		t.Fatalf("token new = %q, %q, %d", out, stderr, code)
	}
	if fi, err := os.Stat(filepath.Join(data, tokens.FileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v", fi, err)
	}
	post := func() int {
		req, _ := http.NewRequest("POST", r.url+"/crosstalk/receive", strings.NewReader("[[CLAUDE→CHATGPT v1]]\nintent: REQUEST\nbody: |\n  from the extension\n[[END]]\n"))
		req.Header.Set("Origin", "chrome-extension://abcdefghijklmnopabcdefghijklmnop")
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if got := post(); got != 200 {
		t.Fatalf("POST from an extension with the minted token = %d, want 200", got)
	}
	out, _, code = runCLI(t, "", "token", "list", "--data", data, "--json")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"principal":"user"`) || strings.Contains(out, secret) {
		t.Fatalf("token list = %q, %d", out, code)
	}
	id := out[strings.Index(out, `"id":"`)+6:]
	id = id[:strings.Index(id, `"`)]
	if _, stderr, code := runCLI(t, "", "token", "revoke", "--data", data, id); code != 0 {
		t.Fatalf("token revoke = %d %s", code, stderr)
	}
	if got := post(); got != 403 {
		t.Fatalf("POST with a revoked token = %d, want 403", got)
	}
	for _, args := range [][]string{{"token"}, {"token", "nope"}, {"token", "revoke", "--data", data}, {"token", "list", "extra", "--data", data}} {
		if _, _, code := runCLI(t, "", args...); code != 2 {
			t.Errorf("crosstalk %v exit = %d, want 2", args, code)
		}
	}
	if _, _, code := runCLI(t, "", "token", "revoke", "--data", data, "ffffffffffff"); code != 1 {
		t.Errorf("revoke of an unknown id exit = %d, want 1", code)
	}
	if _, _, code := runCLI(t, "", "token", "new", "--data", data, "--principal", "two words"); code != 2 {
		t.Errorf("new with a bad principal exit = %d, want 2 (a bad --principal is a usage error)", code)
	}
}

// TestTokenPrincipalLookalike: a principal holding an invisible or bidi
// character — one that shows as another agent's name and can never match
// a sender — is refused with a usage error, nothing minted; an NFD
// principal is minted in NFC, the form senders are compared in.
func TestTokenPrincipalLookalike(t *testing.T) {
	data := t.TempDir()
	for _, p := range []string{"ali\u200bce", "alice\u202e", "ali\u2060ce", "al\u00a0ice"} {
		if out, stderr, code := runCLI(t, "", "token", "new", "--data", data, "--principal", p); code != 2 || out != "" {
			t.Errorf("token new --principal %q = %d, %q, %q; want exit 2 and no token", p, code, out, stderr)
		}
	}
	if _, stderr, code := runCLI(t, "", "token", "new", "--data", data, "--principal", "cafe\u0301"); code != 0 || !strings.Contains(stderr, "\"caf\u00e9\"") {
		t.Errorf("token new --principal NFD = %d, %q; want minted for the NFC name", code, stderr)
	}
	out, _, _ := runCLI(t, "", "token", "list", "--data", data, "--json")
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("token list = %q; want only the NFC one", out)
	}
}

// TestTokenListShowsInvisible: a principal minted before the rule above,
// holding a zero-width space, is listed with it visible (⟨U+200B⟩), not
// as a second "alice"; an empty list says so.
func TestTokenListShowsInvisible(t *testing.T) {
	data := t.TempDir()
	if _, stderr, _ := runCLI(t, "", "token", "list", "--data", data); !strings.Contains(stderr, "no tokens") {
		t.Errorf("token list on an empty data dir: stderr %q, want it to say there are no tokens", stderr)
	}
	file := `{"tokens":[{"id":"1aba29a1edb8","principal":"ali\u200bce","created":"2026-11-29T02:10:33Z","sha256":"bef0af2b78f1f61319360bf5508dec41d552d51ceb9f738afe7af0effb50d2e7"}]}`
	if err := os.WriteFile(filepath.Join(data, tokens.FileName), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "", "token", "list", "--data", data)
	if code != 0 || !strings.Contains(out, "ali⟨U+200B⟩ce") {
		t.Errorf("token list = %d, %q, %q; want the principal shown as ali⟨U+200B⟩ce", code, out, stderr)
	}
}
