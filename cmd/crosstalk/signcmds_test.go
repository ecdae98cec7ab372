package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

// signCLI runs the crosstalk command line in-process with a private user
// config directory (so the default trust store and key directory are in a
// temporary directory).
type signCLI struct {
	t   *testing.T
	dir string
}

func newSignCLI(t *testing.T) *signCLI {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("HOME", dir)
	return &signCLI{t: t, dir: dir}
}

func (c *signCLI) run(stdin string, args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func (c *signCLI) must(stdin string, args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(stdin, args...)
	if code != 0 {
		c.t.Fatalf("crosstalk %s = exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func (c *signCLI) path(name string) string { return filepath.Join(c.dir, name) }

const cliEnv = "[[ALICE→BOB v1]]\nuser: kalle\ncontext: cli\nintent: REQUEST\n\nbody: |\n  Hello Bob.\n\tTabbed, with trailing blanks  \n  Café\nsig: none\n[[END]]\n"

// chatPaste does to text what a chat UI and a careless user do: a fence,
// a quote prefix, CRLF line ends, chat around it.
func chatPaste(text string) string {
	fenced := "```\n" + text + "```\n"
	quoted := "> " + strings.ReplaceAll(strings.TrimSuffix(fenced, "\n"), "\n", "\n> ") + "\n"
	return strings.ReplaceAll("Alice wrote:\n"+quoted+"\nWhat do you think?\n", "\n", "\r\n")
}

func TestCLISignPasteVerify(t *testing.T) {
	c := newSignCLI(t)
	pub := c.must("", "keygen", "--pkid", "alice@example.com", "--out", c.path("alice.key"))
	if !strings.HasPrefix(pub, "ed25519 alice@example.com ") {
		t.Errorf("keygen printed %q, want the public key line", pub)
	}
	fi, err := os.Stat(c.path("alice.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v, %v; want mode 0600", fi, err)
	}
	if _, err := os.Stat(c.path("alice.key.pub")); err != nil {
		t.Fatal(err)
	}
	priv, _ := os.ReadFile(c.path("alice.key"))
	secret := strings.Fields(string(priv[bytes.LastIndex(priv, []byte("ed25519-private")):]))[2]
	if strings.Contains(pub, secret) {
		t.Fatal("keygen printed the private key")
	}
	// A second keygen over the same file fails and keeps the key.
	if code, _, errs := c.run("", "keygen", "--pkid", "alice@example.com", "--out", c.path("alice.key")); code != 1 || !strings.Contains(errs, "hint:") {
		t.Errorf("keygen over an existing key = exit %d, %s", code, errs)
	}
	if again, _ := os.ReadFile(c.path("alice.key")); !bytes.Equal(again, priv) {
		t.Error("keygen overwrote an existing key")
	}

	signed := c.must("Here it is:\n"+cliEnv+"thanks\n", "sign", "--key", c.path("alice.key"), "--announce")
	if strings.Count(signed, "[[END]]") != 1 || strings.Contains(signed, "thanks") || !strings.Contains(signed, "meta: signing\nPublic-Key: ed25519:") {
		t.Fatalf("sign printed:\n%s", signed)
	}
	os.WriteFile(c.path("pasted.txt"), []byte(chatPaste(signed)), 0o644)

	// First time: first-use, pinned in the default trust store.
	out := c.must("", "verify", c.path("pasted.txt"))
	if !strings.Contains(out, "first-use ALICE→BOB pkid=alice@example.com alg=ed25519") {
		t.Errorf("verify = %q, want first-use", out)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "config", "crosstalk", "known_keys")); err != nil {
		t.Errorf("default trust store not written: %v", err)
	}
	// Then verified, from standard input too.
	out = c.must(chatPaste(signed), "verify")
	if !strings.Contains(out, "<stdin>:") || !strings.Contains(out, ": verified ALICE→BOB") {
		t.Errorf("verify = %q, want verified", out)
	}
	// JSON.
	out = c.must("", "verify", "--json", c.path("pasted.txt"))
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); err != nil || j["status"] != "verified" || j["pkid"] != "alice@example.com" || j["alg"] != "ed25519" || j["message"] == "" {
		t.Errorf("verify --json = %s (%v)", out, err)
	}
	if len(j) != 4 {
		t.Errorf("verify --json keys = %v, want status pkid alg message", j)
	}

	// Tampered in transit: bad-signature, exit 1.
	tampered := strings.Replace(chatPaste(signed), "Hello Bob.", "Hello Bob!", 1)
	code, out, _ := c.run(tampered, "verify")
	if code != 1 || !strings.Contains(out, "bad-signature") {
		t.Errorf("verify(tampered) = exit %d, %q", code, out)
	}
	// Unsigned: exit 1.
	if code, out, _ := c.run(cliEnv, "verify"); code != 1 || !strings.Contains(out, "unsigned") {
		t.Errorf("verify(unsigned) = exit %d, %q", code, out)
	}
	// Two envelopes, one bad: both reported, exit 1.
	code, out, _ = c.run(signed+"\n"+strings.Replace(signed, "Café", "Cafe", 1), "verify")
	if code != 1 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "verified") || !strings.Contains(out, "bad-signature") {
		t.Errorf("verify(two) = exit %d, %q", code, out)
	}
}

func TestCLIVerifyKeyNeverSeen(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--alg", "secp256r1", "--pkid", "bob@example.org", "--out", c.path("bob.key"))
	c.must("", "keygen", "--pkid", "bob@example.org", "--out", c.path("other.key"))
	signed := c.must(cliEnv, "sign", "--key", c.path("bob.key"), "--form", "jws")
	if !strings.Contains(signed, "sig: secp256r1:pkid=bob@example.org;sig=eyJ") {
		t.Fatalf("sign --form jws printed:\n%s", signed)
	}
	// The key was never seen and is not announced: unknown-key.
	if code, out, errs := c.run(signed, "verify"); code != 1 || !strings.Contains(out, "unknown-key") || !strings.Contains(errs, "hint:") {
		t.Errorf("verify = exit %d, %q, %q; want unknown-key with a hint", code, out, errs)
	}
	// With --key it verifies, through a chat paste.
	out := c.must(chatPaste(signed), "verify", "--key", c.path("bob.key.pub"))
	if !strings.Contains(out, "verified") || !strings.Contains(out, "alg=secp256r1") {
		t.Errorf("verify --key = %q", out)
	}
	// Another key given: bad-signature, even though it has the same key id.
	if code, out, _ := c.run(signed, "verify", "--key", c.path("other.key.pub")); code != 1 || !strings.Contains(out, "bad-signature") {
		t.Errorf("verify --key other = exit %d, %q", code, out)
	}
	// A sig line relabelled with another key id still verifies with the
	// given key (the key id is not signed), and the answer says whose
	// key that is.
	relabelled := strings.Replace(signed, "pkid=bob@example.org", "pkid=carol@example.org", 1)
	out = c.must(relabelled, "verify", "--key", c.path("bob.key.pub"))
	if !strings.Contains(out, "verified") || !strings.Contains(out, "the given key is bob@example.org's") {
		t.Errorf("verify --key of a relabelled sig line = %q; want it to name the given key's id", out)
	}
	if out := c.must(signed, "verify", "--key", c.path("bob.key.pub")); strings.Contains(out, "is not signed") {
		t.Errorf("verify --key with the key's own id = %q; want no note", out)
	}
	// Nothing was pinned by --key.
	if out := c.must("", "trust", "list", "--json"); out != "" {
		t.Errorf("trust list after verify --key = %q, want nothing", out)
	}
}

func TestCLIKeyChangedAndRepin(t *testing.T) {
	c := newSignCLI(t)
	trust := c.path("known_keys")
	c.must("", "keygen", "--pkid", "alice", "--out", c.path("old.key"))
	c.must("", "keygen", "--pkid", "alice", "--out", c.path("new.key"))
	oldSigned := c.must(cliEnv, "sign", "--key", c.path("old.key"), "--announce")
	newSigned := c.must(cliEnv, "sign", "--key", c.path("new.key"), "--announce")
	os.WriteFile(c.path("new.txt"), []byte(newSigned), 0o644)

	c.must(oldSigned, "verify", "--trust", trust)
	code, out, errs := c.run("", "verify", "--trust", trust, c.path("new.txt"))
	if code != 1 || !strings.Contains(out, "key-changed") || !strings.Contains(errs, "crosstalk trust pin alice --from") {
		t.Fatalf("verify(new key) = exit %d, %q, %q; want key-changed with a re-pin hint", code, out, errs)
	}
	// --no-tofu never pins.
	if code, out, _ := c.run(newSigned, "verify", "--no-tofu", "--trust", c.path("other_keys")); code != 1 || !strings.Contains(out, "unknown-key") {
		t.Errorf("verify --no-tofu = exit %d, %q", code, out)
	}
	out = c.must("", "trust", "pin", "alice", "--from", c.path("new.txt"), "--trust", trust)
	if !strings.Contains(out, "pinned alice to ed25519") || !strings.Contains(out, "(was SHA256:") {
		t.Errorf("trust pin --from = %q", out)
	}
	c.must(newSigned, "verify", "--trust", trust)
	if code, out, _ := c.run(oldSigned, "verify", "--trust", trust); code != 1 || !strings.Contains(out, "key-changed") {
		t.Errorf("verify(old key after re-pin) = exit %d, %q", code, out)
	}

	// Revoke by hand, then the key's signatures are revoked.
	c.must("", "trust", "revoke", "alice", "--trust", trust)
	if code, out, _ := c.run(newSigned, "verify", "--trust", trust); code != 1 || !strings.Contains(out, "revoked") {
		t.Errorf("verify(revoked) = exit %d, %q", code, out)
	}
	list := c.must("", "trust", "list", "--trust", trust)
	if !strings.Contains(list, "alice  ed25519 SHA256:") || !strings.Contains(list, "REVOKED") {
		t.Errorf("trust list = %q", list)
	}
	c.must("", "trust", "remove", "alice", "--trust", trust)
	if code, _, errs := c.run("", "trust", "remove", "alice", "--trust", trust); code != 1 || !strings.Contains(errs, "unknown key") {
		t.Errorf("trust remove (again) = exit %d, %q", code, errs)
	}
}

func TestCLIRevokeEnvelope(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "alice@example.com", "--out", c.path("a.key"))
	c.must(c.must(cliEnv, "sign", "--key", c.path("a.key"), "--announce"), "verify")
	rev := "[[ALICE→ALL v1]]\nintent: REVOKE\n\nmeta: revoke\nPkid: alice@example.com\n\nbody: |\n  My key is compromised.\n[[END]]\n"
	out := c.must(c.must(rev, "sign", "--key", c.path("a.key")), "verify")
	if !strings.Contains(out, "verified") || !strings.Contains(out, "revoked the key alice@example.com") {
		t.Errorf("verify(REVOKE) = %q", out)
	}
	if code, out, _ := c.run(c.must(cliEnv, "sign", "--key", c.path("a.key")), "verify"); code != 1 || !strings.Contains(out, "revoked") {
		t.Errorf("verify after REVOKE = exit %d, %q", code, out)
	}
}

func TestCLITrustAdd(t *testing.T) {
	c := newSignCLI(t)
	pub := strings.Fields(c.must("", "keygen", "--pkid", "carol", "--out", c.path("c.key")))
	signed := c.must(cliEnv, "sign", "--key", c.path("c.key"))
	// add a key file
	if out := c.must("", "trust", "add", c.path("c.key.pub")); !strings.Contains(out, "added carol ed25519 SHA256:") {
		t.Errorf("trust add = %q", out)
	}
	c.must(signed, "verify")
	// add alg:base64 with --pkid, and a conflicting key
	c.must("", "trust", "add", "ed25519:"+pub[2], "--pkid", "carol2")
	c.must("", "keygen", "--pkid", "carol", "--out", c.path("c2.key"))
	if code, _, errs := c.run("", "trust", "add", c.path("c2.key.pub")); code != 1 || !strings.Contains(errs, "key changed") || !strings.Contains(errs, "trust pin carol") {
		t.Errorf("trust add(conflict) = exit %d, %q", code, errs)
	}
	out := c.must("", "trust", "list", "--json")
	if n := strings.Count(out, "\n"); n != 2 || !strings.Contains(out, `"source":"manual"`) {
		t.Errorf("trust list --json = %q", out)
	}
	for _, args := range [][]string{{"trust"}, {"trust", "frobnicate"}, {"trust", "add"}, {"trust", "add", "ed25519:AAAA"}, {"trust", "pin", "x"}} {
		if code, _, _ := c.run("", args...); code != 2 {
			t.Errorf("crosstalk %v = exit %d, want 2", args, code)
		}
	}
}

func TestCLISignErrors(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "alice", "--out", c.path("a.key"))
	os.Chmod(c.path("a.key"), 0o644)
	if code, _, errs := c.run(cliEnv, "sign", "--key", c.path("a.key")); code != 1 || !strings.Contains(errs, "chmod 600") {
		t.Errorf("sign with a world-readable key = exit %d, %q", code, errs)
	}
	os.Chmod(c.path("a.key"), 0o600)
	if code, _, errs := c.run("no envelopes here", "sign", "--key", c.path("a.key")); code != 1 || !strings.Contains(errs, "no envelope found") {
		t.Errorf("sign(no envelope) = exit %d, %q", code, errs)
	}
	for _, args := range [][]string{{"sign"}, {"sign", "--key", c.path("a.key"), "--form", "xml"}, {"keygen"}, {"keygen", "--pkid", "a b"}, {"keygen", "--pkid", "a", "--alg", "rsa"},
		{"verify", "--key", c.path("a.key.pub"), "--dns"}} {
		if code, _, _ := c.run(cliEnv, args...); code != 2 {
			t.Errorf("crosstalk %v = exit %d, want 2", args, code)
		}
	}
	// Malformed envelope among good ones: the good one is signed, exit 1.
	code, out, errs := c.run("[[A→B v1]]\nbody: |\n  no intent\n[[END]]\n"+cliEnv, "sign", "--key", c.path("a.key"))
	if code != 1 || strings.Count(out, "[[END]]") != 1 || !strings.Contains(errs, "missing intent") {
		t.Errorf("sign(one malformed) = exit %d, %q, %q", code, out, errs)
	}
}

// TestCLISignPublishedKey: the published PEM test key signs as the
// published vectors were signed.
func TestCLISignPublishedKey(t *testing.T) {
	c := newSignCLI(t)
	pemData, err := fixtures.SigningFS.ReadFile("signing/canon-v1.1-rc1/private.pem")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(c.path("canon.pem"), pemData, 0o600)
	pubPEM, _ := fixtures.SigningFS.ReadFile("signing/canon-v1.1-rc1/public.pem")
	os.WriteFile(c.path("canon.pub.pem"), pubPEM, 0o644)
	vector := "[[BROTHER→CLAUDE v1]]\nuser: kalle\nsession: 2025-10-09T17Z b447a4\ncontext: canonicalization-spec\nintent: REQUEST\nbody: |\n  Hello, world.\n"
	if code, _, errs := c.run(vector, "sign", "--key", c.path("canon.pem")); code != 1 || !strings.Contains(errs, "--pkid") {
		t.Errorf("sign with PEM and no --pkid = exit %d, %q", code, errs)
	}
	out := c.must(vector, "sign", "--key", c.path("canon.pem"), "--pkid", "canon", "--form", "bare")
	const published = "eyJhbGciOiJFZERTQSIsImI2NCI6dHJ1ZSwiY3JpdCI6WyJiNjQiLCJjdHkiLCJ2ZXIiXSwiY3R5IjoiY3Jvc3N0YWxrL3YxLjEiLCJ0eXAiOiJKT1NFIiwidmVyIjoiMS4xLXJjMSJ9..oEOgk8uQrWq_xVa8n68QxQ-O2TbpEAKH7wMHrDpkNG0jD0t8LSt5qZSlMbyCIFTJHZ2zidfM1tfXZy6LruTEBQ"
	if out != vector+"sig: "+published+"\n[[END]]\n" {
		t.Errorf("sign(vector 1) =\n%s\nwant the published signature", out)
	}
	if got := c.must(chatPaste(out), "verify", "--key", c.path("canon.pub.pem")); !strings.Contains(got, "verified") {
		t.Errorf("verify --key PEM = %q", got)
	}
	// The published vector is a bare JWS without Pkid: (it names no key
	// id): with its key pinned by hand under the sender's address, as
	// docs/signing.md §3 says, it verifies from the trust store too.
	if code, got, errs := c.run(out, "verify"); code != 1 || !strings.Contains(got, "unknown-key") {
		t.Errorf("verify(bare JWS, nothing pinned) = exit %d, %q, %q", code, got, errs)
	}
	c.must("", "trust", "add", c.path("canon.pub.pem"), "--pkid", "BROTHER")
	if code, got, errs := c.run(chatPaste(out), "verify"); code != 0 || !strings.Contains(got, "verified") || !strings.Contains(got, "pkid=BROTHER") {
		t.Errorf("verify(bare JWS, key pinned for the sender's address) = exit %d, %q, %q", code, got, errs)
	}
	fenced := c.must(vector, "sign", "--key", c.path("canon.pem"), "--pkid", "canon", "--fence")
	if !strings.HasPrefix(fenced, "```\n[[BROTHER") || !strings.HasSuffix(fenced, "[[END]]\n```\n") {
		t.Errorf("sign --fence = %q", fenced)
	}
}

// TestCLIKeygenDirNotReadable: keygen's default key directory is left
// readable and searchable by its owner alone (0700), also when it existed
// before with wider permissions; a --out directory others may write to
// gets a warning.
func TestCLIKeygenDirNotReadable(t *testing.T) {
	c := newSignCLI(t)
	dir := filepath.Join(c.dir, "config", "crosstalk", "keys")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	c.must("", "keygen", "--pkid", "a@example.com")
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("key directory %s is %v, want no group or other access", dir, perm)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a@example.com.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private key: %v, %v; want mode 0600", fi, err)
	}

	open := c.path("open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := c.run("", "keygen", "--pkid", "b", "--out", filepath.Join(open, "b.key")); code != 0 || !strings.Contains(errs, "warning") {
		t.Errorf("keygen --out into a world-writable directory = %d, stderr %q; want a warning", code, errs)
	}
}

// TestCLITrustAddKeygenLine: the public key line keygen prints — what its
// help says to give to the people who should trust you — is a KEY that
// trust add and trust pin take as it is.
func TestCLITrustAddKeygenLine(t *testing.T) {
	c := newSignCLI(t)
	line := strings.TrimSpace(c.must("", "keygen", "--pkid", "dave@example.com", "--out", c.path("d.key")))
	if out := c.must("", "trust", "add", line); !strings.Contains(out, "added dave@example.com ed25519 SHA256:") {
		t.Errorf("trust add %q = %q", line, out)
	}
	line2 := strings.TrimSpace(c.must("", "keygen", "--pkid", "dave@example.com", "--out", c.path("d2.key")))
	if out := c.must("", "trust", "pin", "dave@example.com", line2); !strings.Contains(out, "dave@example.com") {
		t.Errorf("trust pin dave@example.com %q = %q", line2, out)
	}
}

// TestCLIKeygenNoOrphanKey: when keygen cannot write FILE.pub (a dangling
// symlink is in its place, which a Stat does not see), it fails and leaves
// no private key behind: a key without its public half, which a second
// keygen then refuses to replace.
func TestCLIKeygenNoOrphanKey(t *testing.T) {
	c := newSignCLI(t)
	key := c.path("k.key")
	if err := os.Symlink(c.path("nowhere"), key+".pub"); err != nil {
		t.Skip("no symlinks here:", err)
	}
	code, out, errs := c.run("", "keygen", "--pkid", "k@example.com", "--out", key)
	if code != 1 || out != "" || !strings.Contains(errs, "k.key.pub") {
		t.Errorf("keygen with FILE.pub a dangling symlink = exit %d, stdout %q, stderr %q; want exit 1 naming FILE.pub", code, out, errs)
	}
	if _, err := os.Lstat(key); err == nil {
		t.Error("keygen failed but left the private key file behind")
	}
	if _, err := os.Stat(c.path("nowhere")); err == nil {
		t.Error("keygen wrote the public key through the symlink")
	}
	left, _ := os.ReadDir(c.dir)
	for _, e := range left {
		if strings.Contains(e.Name(), "tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestCLITrustKeyIDNFD: a key id typed or pasted in NFD (macOS) names the
// same pin as its NFC form, which trust list shows identically: revoke,
// remove and pin find it, as the sig line's pkid= does.
func TestCLITrustKeyIDNFD(t *testing.T) {
	c := newSignCLI(t)
	nfc, nfd := "j\u00f6rg@example.com", "jo\u0308rg@example.com"
	c.must("", "keygen", "--pkid", nfc, "--out", c.path("j.key"))
	c.must("", "trust", "add", c.path("j.key.pub"))
	if code, out, errs := c.run("", "trust", "revoke", nfd); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("trust revoke NFD = exit %d, %q, %q", code, out, errs)
	}
	if out := c.must("", "trust", "list"); !strings.Contains(out, "REVOKED") {
		t.Errorf("after trust revoke NFD, trust list = %q", out)
	}
	c.must("", "keygen", "--pkid", nfc, "--out", c.path("j2.key"))
	pub := strings.TrimSpace(string(must(os.ReadFile(c.path("j2.key.pub")))))
	pub = pub[strings.LastIndex(pub, "\n")+1:]
	if code, out, errs := c.run("", "trust", "pin", nfd, pub); code != 0 || !strings.Contains(out, "pinned "+nfc) {
		t.Errorf("trust pin NFD = exit %d, %q, %q", code, out, errs)
	}
	if code, out, errs := c.run("", "trust", "remove", nfd); code != 0 || !strings.Contains(out, "removed") {
		t.Errorf("trust remove NFD = exit %d, %q, %q", code, out, errs)
	}
	// keygen and sign take an NFD --pkid as its NFC form too.
	if code, out, errs := c.run("", "keygen", "--pkid", nfd, "--out", c.path("j3.key")); code != 0 || !strings.Contains(out, nfc) {
		t.Errorf("keygen --pkid NFD = exit %d, %q, %q", code, out, errs)
	}
	if code, out, errs := c.run(cliEnv, "sign", "--key", c.path("j.key"), "--pkid", nfd); code != 0 || !strings.Contains(out, "pkid="+nfc) {
		t.Errorf("sign --pkid NFD = exit %d, %q, %q", code, out, errs)
	}
}

// TestCLISignKeyIsDirectory: --key naming a directory says so, rather
// than calling it a key file others may read and suggesting chmod 600.
func TestCLISignKeyIsDirectory(t *testing.T) {
	c := newSignCLI(t)
	dir := c.path("keys")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errs := c.run(cliEnv, "sign", "--key", dir)
	if code != 1 || !strings.Contains(errs, "directory") || strings.Contains(errs, "chmod") {
		t.Errorf("sign --key DIR = exit %d, %q; want exit 1 saying it is a directory", code, errs)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCLITrustAddPrivateKeyNotEchoed: pasting the private key line (or
// the whole private key file) where trust add or pin wants a public key
// is refused without printing the private key back (docs/signing.md §4:
// it is never printed or logged).
func TestCLITrustAddPrivateKeyNotEchoed(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "alice@example.com", "--out", c.path("a.key"))
	file := string(must(os.ReadFile(c.path("a.key"))))
	line := file[strings.Index(file, "ed25519-private"):]
	seed := strings.Fields(line)[2]
	for _, args := range [][]string{
		{"trust", "add", line},
		{"trust", "add", strings.TrimSpace(line)},
		{"trust", "add", file},
		{"trust", "add", line, "--pkid", "alice@example.com"},
		{"trust", "pin", "alice@example.com", line},
		{"trust", "add", "ed25519-private:" + seed, "--pkid", "alice@example.com"},
	} {
		code, out, errs := c.run("", args...)
		if code != 2 || strings.Contains(out+errs, seed) || !strings.Contains(errs, "private key") {
			t.Errorf("crosstalk %s = exit %d, stdout %q, stderr %q; want exit 2 saying it is a private key, without it", args[:2], code, out, errs)
		}
	}
}

// TestRelayHelpTrustStore: relay --help said the data dir holds the trust
// store, but the relay uses the trust_file of docs/configuration.md — by
// default the one crosstalk verify and trust use, in the user config
// directory — so a key pinned under --data DIR was never trusted.
func TestRelayHelpTrustStore(t *testing.T) {
	c := newSignCLI(t)
	out := c.must("", "relay", "--help")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "-data") || strings.HasPrefix(line, "    \t") && strings.Contains(line, "data dir") {
			if strings.Contains(line, "trust") {
				t.Errorf("relay --help: %q: the data dir does not hold the trust store", line)
			}
		}
	}
}

// TestCLIKeyFileBounded: a key file is read up to 64 KiB, as a private
// key file always was: `trust add /dev/zero` or `verify --key` of a large
// file named by mistake must not read it whole into memory.
func TestCLIKeyFileBounded(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "big@example.com", "--out", c.path("b.key"))
	pub := string(must(os.ReadFile(c.path("b.key.pub"))))
	pad := "#" + strings.Repeat("x", 40<<10) + "\n"
	big := c.path("big.pub")
	if err := os.WriteFile(big, []byte(pub+pad+pad), 0o644); err != nil {
		t.Fatal(err)
	}
	signed := c.must(cliEnv, "sign", "--key", c.path("b.key"))
	for _, args := range [][]string{{"verify", "--key", big}, {"trust", "add", big}} {
		code, _, errs := c.run(signed, args...)
		if code != 1 || !strings.Contains(errs, "larger than") {
			t.Errorf("crosstalk %s of a %d-byte key file = exit %d, %q; want exit 1, larger than 64 KiB", args[:2], len(pub)+2*len(pad), code, errs)
		}
	}
}

// TestCLIKeygenOutErrors: keygen's errors name the --out path as given,
// never the temporary file the key is written through.
func TestCLIKeygenOutErrors(t *testing.T) {
	c := newSignCLI(t)
	missing := c.path("no/such/dir/k.key")
	if code, _, errs := c.run("", "keygen", "--pkid", "k", "--out", missing); code != 1 || !strings.Contains(errs, missing) || strings.Contains(errs, ".tmp-") {
		t.Errorf("keygen --out into a missing directory = exit %d, %q", code, errs)
	}
	if code, _, errs := c.run("", "keygen", "--pkid", "k", "--out", c.dir); code != 1 || !strings.Contains(errs, "is a directory") {
		t.Errorf("keygen --out DIR = exit %d, %q", code, errs)
	}
}

// TestCLISignWarnsOtherAnnouncedKey: signing (without --announce) an
// envelope that announces another key — one signed before with an old key,
// or someone else's — gives an envelope a receiver without a pin finds
// bad-signature (the announced key must verify it); sign says so, and
// --announce replaces the announcement.
func TestCLISignWarnsOtherAnnouncedKey(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "old@example.com", "--out", c.path("old.key"))
	c.must("", "keygen", "--pkid", "new@example.com", "--out", c.path("new.key"))
	announced := c.must(cliEnv, "sign", "--key", c.path("old.key"), "--announce")
	code, out, errs := c.run(announced, "sign", "--key", c.path("new.key"))
	if code != 0 || !strings.Contains(errs, "warning") || !strings.Contains(errs, "--announce") {
		t.Errorf("sign of an envelope announcing another key = exit %d, stderr %q; want a warning naming --announce", code, errs)
	}
	if code, got, _ := c.run(out, "verify", "--trust", c.path("fresh")); code != 1 || !strings.Contains(got, "bad-signature") {
		t.Errorf("the warned-of envelope verifies as %q (exit %d); the warning is wrong", got, code)
	}
	if _, _, errs := c.run(announced, "sign", "--key", c.path("new.key"), "--announce"); strings.Contains(errs, "warning") {
		t.Errorf("sign --announce warned: %q", errs)
	}
	if _, _, errs := c.run(announced, "sign", "--key", c.path("old.key")); strings.Contains(errs, "warning") {
		t.Errorf("sign with the announced key warned: %q", errs)
	}
}

// TestHelpDoesNotPrintToken: --token took $CROSSTALK_TOKEN as its flag
// default, and --help prints defaults, so `crosstalk send --help` showed
// the user's bearer token to whoever saw the terminal or a pasted help.
func TestHelpDoesNotPrintToken(t *testing.T) {
	c := newSignCLI(t)
	const secret = "ctk_help_must_not_show_this"
	t.Setenv("CROSSTALK_TOKEN", secret)
	_, usage, usageErr := c.run("", "--help")
	var cmds [][]string
	for _, line := range strings.Split(usage+usageErr, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(line, "  ") && f[0] != "help" {
			cmds = append(cmds, []string{f[0]})
		}
	}
	cmds = append(cmds, []string{"clip", "watch"}, []string{"clip", "copy"})
	if len(cmds) < 20 {
		t.Fatalf("found %d commands in crosstalk --help, want the whole list:\n%s%s", len(cmds), usage, usageErr)
	}
	withToken := 0
	for _, cmd := range cmds {
		_, out, errs := c.run("", append(cmd, "--help")...)
		if strings.Contains(out+errs, "-token") {
			withToken++
		}
		if strings.Contains(out+errs, secret) {
			t.Errorf("crosstalk %s --help printed $CROSSTALK_TOKEN", strings.Join(cmd, " "))
		}
	}
	if withToken < 5 {
		t.Errorf("only %d commands have --token in their help; the check looked at the wrong output", withToken)
	}
}

// TestCLIEmptyTrustFlag: --trust= is a usage error that says so, not
// that the user config directory is unknown (it is known here).
func TestCLIEmptyTrustFlag(t *testing.T) {
	c := newSignCLI(t)
	for _, args := range [][]string{{"verify", "--trust="}, {"trust", "list", "--trust="}} {
		code, _, errs := c.run(cliEnv, args...)
		if code != 2 || !strings.Contains(errs, "--trust is empty") || strings.Contains(errs, "config directory") {
			t.Errorf("crosstalk %v = exit %d, %q; want 2 and --trust is empty", args, code, errs)
		}
	}
}

// TestCLISignOverReaderLimits: an envelope just within the 1 MiB limit
// (docs/format.md §8) that the sig line and the announced key push over
// it is not written (readers would refuse it as E-TOO-LARGE): exit 1, an
// error naming the file and line; the others are signed.
func TestCLISignOverReaderLimits(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "alice", "--out", c.path("a.key"))
	head, tail := "[[A→B v1]]\nintent: REQUEST\n\nbody: |\n", "sig: none\n[[END]]\n"
	n := envelope.MaxEnvelopeSize - 40 - len(head) - len(tail)
	var body strings.Builder
	for ; n > 102; n -= 102 {
		body.WriteString("  " + strings.Repeat("y", 99) + "\n")
	}
	body.WriteString("  " + strings.Repeat("y", n-3) + "\n")
	big := head + body.String() + tail
	if code, _, _ := c.run(big, "validate"); code != 0 {
		t.Fatalf("the unsigned envelope does not validate")
	}
	path := c.path("big envelope.txt")
	if err := os.WriteFile(path, []byte(cliEnv+"\n"+big), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := c.run("", "sign", "--announce", "--key", c.path("a.key"), path)
	if code != 1 || strings.Count(out, "[[END]]") != 1 || !strings.Contains(errs, "big envelope.txt:13: ") || !strings.Contains(errs, "E-TOO-LARGE") {
		t.Errorf("sign(over the limit once signed) = exit %d, %d envelopes, %q; want 1, the small one, an E-TOO-LARGE at big envelope.txt:13", code, strings.Count(out, "[[END]]"), errs)
	}
}

// TestCLIFlagValuesRefused: flag values that cannot mean what they say are
// usage errors (exit 2) before anything is done — send --retries -1 was
// taken as 0, keygen --out= wrote the key to the default path — and send's
// synopsis lists --retries, which README.md shows.
func TestCLIFlagValuesRefused(t *testing.T) {
	c := newSignCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"send", "--relay", "http://127.0.0.1:1", "--retries", "-1"}, "--retries -1 is negative"},
		{[]string{"keygen", "--pkid", "alice@example.com", "--out="}, "--out is empty"},
		{[]string{"keygen", "--pkid", "alice@example.com", "--out", ""}, "--out is empty"},
	} {
		code, out, errs := c.run(cliEnv, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("crosstalk %q = exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errs, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(c.dir, "config", "crosstalk", "keys")); err == nil {
		t.Error("keygen --out= wrote a key to the default directory")
	}
	if out := c.must("", "send", "--help"); !strings.Contains(strings.SplitN(out, "\n", 2)[0], "[--retries N]") {
		t.Errorf("send --help synopsis %q lacks [--retries N]", strings.SplitN(out, "\n", 2)[0])
	}
}

// TestCLITrustPinFromMalformed: trust pin --from a file whose envelope
// cannot be read names the file, the line and what is wrong (it said only
// that no envelope was signed); a good signed envelope in the same file
// is still pinned.
func TestCLITrustPinFromMalformed(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "alice", "--out", c.path("a.key"))
	signed := c.must(cliEnv, "sign", "--key", c.path("a.key"), "--announce")
	broken := strings.Replace(signed, "intent: REQUEST\n", "", 1) // still signed, no intent
	for _, tc := range []struct {
		name, text string
		code       int
		want       string
	}{
		{"malformed", broken, 1, "bad.txt:1: E-FORMAT: missing intent"},
		{"malformed then good", broken + "\n" + signed, 0, "pinned alice to ed25519"},
		{"unsigned", cliEnv, 1, "no envelope in"},
	} {
		file := c.path("bad.txt")
		if err := os.WriteFile(file, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errs := c.run("", "trust", "pin", "alice", "--from", file, "--trust", c.path(tc.name+".keys"))
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%s: trust pin --from = exit %d, %q, %q; want %d and %q", tc.name, code, out, errs, tc.code, tc.want)
		}
	}
}

// TestCLIVerifyBadTrustStore: verify with a trust store it cannot read or
// parse fails (exit 1) naming the file and what is wrong, and verifies
// nothing — it reported every envelope unknown-key and told the user to
// ask the sender for the key; also with --key, whose revocation check
// reads the store, and with --json.
func TestCLIVerifyBadTrustStore(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "alice", "--out", c.path("a.key"))
	signed := c.must(cliEnv, "sign", "--key", c.path("a.key"), "--announce")
	for _, tc := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("\x00\xffgarbage\n"), 0o600) }, "line 1"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "is a directory"},
	} {
		trust := c.path(tc.name + ".keys")
		if err := tc.make(trust); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"verify", "--trust", trust},
			{"verify", "--trust", trust, "--key", c.path("a.key.pub")},
			{"verify", "--trust", trust, "--json"},
		} {
			code, out, errs := c.run(signed, args...)
			if code != exitFailure || !strings.Contains(errs, trust) || !strings.Contains(out+errs, tc.want) ||
				strings.Contains(out+errs, "unknown-key") || strings.Contains(errs, "ask the sender") {
				t.Errorf("%s: crosstalk %q = exit %d, stdout %q, stderr %q; want 1 and an error naming %s, %q", tc.name, args, code, out, errs, trust, tc.want)
			}
		}
	}
}
