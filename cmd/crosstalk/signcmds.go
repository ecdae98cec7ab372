package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/signing"
	"golang.org/x/text/unicode/norm"
)

// The signing commands (docs/design.md §4, docs/signing.md).

var cmdKeygen = &command{
	name:    "keygen",
	args:    "[--alg ed25519|secp256r1] --pkid ID [--out FILE]",
	summary: "create a signing key pair",
	run:     runKeygen,
}

var cmdSign = &command{
	name:    "sign",
	args:    "--key FILE [--pkid ID] [--announce] [--form plain|jws|bare] [--fence] [FILE...]",
	summary: "sign every envelope found",
	run:     runSign,
}

var cmdVerify = &command{
	name:    "verify",
	args:    "[--trust FILE] [--key PUBFILE] [--no-tofu] [--dns] [--json] [FILE...]",
	summary: "verify the signature of every envelope found",
	run:     runVerify,
}

var cmdTrust = &command{
	name:    "trust",
	args:    "list|add|remove|revoke|pin [--trust FILE] [args]",
	summary: "show and change the trust store of pinned keys",
	run:     runTrust,
}

// defaultTrustFile is $XDG_CONFIG_HOME/crosstalk/known_keys (or the
// platform's user config directory).
func defaultTrustFile() string {
	d, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "crosstalk", "known_keys")
}

func trustFlag(fs interface {
	String(string, string, string) *string
}) *string {
	def := defaultTrustFile()
	return fs.String("trust", def, "trust store `file` (known keys)")
}

func openTrust(path string) (*signing.TrustStore, error) {
	if path == "" {
		return nil, usagef("no trust store: %s; give --trust FILE", noTrustReason())
	}
	return signing.NewTrustStore(path), nil
}

// noTrustReason says why the trust store path is empty: given so
// (--trust=), or no default for it.
func noTrustReason() string {
	if defaultTrustFile() == "" {
		return "the user config directory is unknown"
	}
	return "--trust is empty"
}

// cliPkid reads a key id given on the command line in NFC, as a sig
// line's pkid= is read: one typed or pasted in NFD (macOS) names the same
// key as its NFC form, which looks the same (docs/signing.md §4).
func cliPkid(s string) string { return norm.NFC.String(s) }

// safeFileName turns a key id into a file name.
func safeFileName(pkid string) string {
	var b strings.Builder
	for _, r := range pkid {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '@' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return strings.TrimLeft(b.String(), ".")
}

func runKeygen(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Keygen creates a key pair. It writes the private key to FILE with mode 0600 and
the public key to FILE.pub, and prints the public key line. The private key is
never printed. Without --out, FILE is <user config dir>/crosstalk/keys/<ID>.key.
Existing files are never overwritten.

Give the public key line to the people who should trust you (crosstalk trust
add 'LINE', quoted), or sign with --announce so they pin it on first use.`)
	algName := fs.String("alg", "ed25519", "algorithm: ed25519 or secp256r1")
	pkid := fs.String("pkid", "", "key `id`, e.g. alice@example.com (required)")
	out := fs.String("out", "", "private key `file`")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("keygen: unexpected argument %q", pos[0])
	}
	if *out == "" && flagSet(fs, "out") {
		// --out= is no file; writing the default one instead would put
		// the key where it was not asked for.
		return usagef("keygen: --out is empty; give a file, or leave --out out for <user config dir>/crosstalk/keys/<ID>.key")
	}
	if *pkid == "" {
		return usagef("keygen: --pkid is required (e.g. --pkid alice@example.com)")
	}
	alg, err := signing.ParseAlg(*algName)
	if err != nil {
		return usagef("keygen: --alg: %v", err)
	}
	k, err := signing.GenerateKey(alg, cliPkid(*pkid))
	if err != nil {
		return usagef("keygen: --pkid: %v", err)
	}
	path := *out
	if path == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return usagef("keygen: the user config directory is unknown; give --out FILE")
		}
		dir := filepath.Join(d, "crosstalk", "keys")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		// crosstalk's own directory: made 0700 if it was there wider, so
		// that nobody else lists the key ids or reaches the files.
		if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("key directory %s is %v: %w", dir, fi.Mode().Perm(), err)
			}
			fmt.Fprintf(e.stderr, "crosstalk: %s was %v; made it 0700\n", dir, fi.Mode().Perm())
		}
		path = filepath.Join(dir, safeFileName(*pkid)+".key")
	} else if fi, err := os.Stat(filepath.Dir(path)); err == nil && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		// Not ours to change, but whoever may write there may replace
		// the key pair.
		fmt.Fprintf(e.stderr, "crosstalk: warning: others may write to %s (%v): they could replace the key; keep keys in a directory only you can write to\n", filepath.Dir(path), fi.Mode().Perm())
	}
	if _, err := os.Lstat(path + ".pub"); err == nil {
		return withHint(fmt.Errorf("%s.pub already exists", path), "choose another --out, or remove the old key pair first")
	}
	if err := signing.WritePrivateKeyFile(path, k); err != nil {
		if errors.Is(err, os.ErrExist) {
			return withHint(err, "choose another --out, or remove the old key pair first")
		}
		return err
	}
	if err := signing.WritePublicKeyFile(path+".pub", k.Public()); err != nil {
		// No private key without its public half: a second keygen would
		// refuse to replace it.
		os.Remove(path)
		if errors.Is(err, os.ErrExist) {
			return withHint(err, "choose another --out, or remove the old key pair first")
		}
		return err
	}
	fmt.Fprintf(e.stderr, "crosstalk: wrote private key %s (mode 0600) and public key %s.pub\ncrosstalk: fingerprint %s\n", path, path, k.Public().Fingerprint())
	_, err = fmt.Fprintln(e.stdout, k.Public())
	return err
}

// loadSignKey loads a private key file, with hints for the usual mistakes.
func loadSignKey(path, pkid string) (*signing.PrivateKey, error) {
	k, err := signing.LoadPrivateKey(path, pkid)
	switch {
	case errors.Is(err, signing.ErrInsecureKeyFile):
		return nil, withHint(err, "run: chmod 600 "+path)
	case errors.Is(err, signing.ErrNoKeyID):
		return nil, withHint(err, "give the key id with --pkid ID")
	case err != nil && pkid != "":
		return nil, usagef("sign: %v", err)
	}
	return k, err
}

func runSign(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Sign signs every envelope found in the input (chat text, fences, quotes and CRLF
are fine) and prints each signed envelope — envelopes only, separated by one
blank line. The lines above sig: are kept exactly as they were; the sig: line is
replaced (or added before [[END]]). See docs/signing.md.

--announce adds a "meta: signing" block with your public key to the signed part,
so receivers who have never seen your key pin it on first use. Without it, an
envelope that already announces another key is signed with a warning: receivers
who have not pinned your key will find it bad-signature.

The key file is one written by crosstalk keygen, or a PKCS#8 PEM private key
(then --pkid is required). Private key files must not be readable by others.

Exit status: 0 if every envelope was signed, 1 if any could not be, 2 for usage
errors.`)
	keyPath := fs.String("key", "", "private key `file` (required)")
	pkid := fs.String("pkid", "", "key `id` to sign as (default: the key file's)")
	announce := fs.Bool("announce", false, "add meta: signing Public-Key so receivers can pin the key")
	form := fs.String("form", "plain", "sig line form: plain (alg:pkid=…;sig=…), jws (sig=<detached JWS>) or bare (the JWS alone)")
	fence := fs.Bool("fence", false, "wrap each signed envelope in a ``` fence for chat UIs")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *keyPath == "" {
		return usagef("sign: --key FILE is required (create one with crosstalk keygen)")
	}
	opts := &signing.SignOptions{Announce: *announce}
	switch *form {
	case "plain":
	case "jws":
		opts.Form = signing.FormJWS
	case "bare":
		opts.Form = signing.FormBareJWS
	default:
		return usagef("sign: --form must be plain, jws or bare, not %q", *form)
	}
	k, err := loadSignKey(*keyPath, cliPkid(*pkid))
	if err != nil {
		return err
	}
	n, failed := 0, false
	err = eachInput(e, files, func(in input) error {
		return readEnvelopes(in, false, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
			if se != nil {
				failed = true
				fmt.Fprintln(e.stderr, visible(fmt.Sprintf("crosstalk: %s:%d: %s: %s", in.name, se.Line, se.Code, se.Msg)))
				return nil
			}
			out, err := signing.SignEnvelope(env, k, opts)
			if err != nil {
				failed = true
				fmt.Fprintln(e.stderr, visible(fmt.Sprintf("crosstalk: %s:%d: %v", in.name, env.Line, err)))
				return nil
			}
			if err := readsBack(out); err != nil {
				// The signature's lines pushed it over the limits.
				failed = true
				fmt.Fprintln(e.stderr, visible(fmt.Sprintf("crosstalk: %s:%d: signed, %v", in.name, env.Line, err)))
				return nil
			}
			if v, ok := env.MetaValue("signing", "Public-Key"); ok && !opts.Announce {
				if a, err := signing.ParsePublicKeyValue(k.Pkid, v); err != nil || !a.Equal(k.Public()) {
					// The announced key must verify the signature
					// wherever this key is not pinned.
					fmt.Fprintln(e.stderr, visible(fmt.Sprintf("crosstalk: %s:%d: warning: the envelope announces another key (meta: signing Public-Key); receivers who have not pinned %s will see bad-signature: sign with --announce to announce yours instead", in.name, env.Line, k.Pkid)))
				}
			}
			var b strings.Builder
			if n > 0 {
				b.WriteByte('\n')
			}
			n++
			if *fence {
				fenceStr := strings.Repeat("`", max(3, longestBacktickRun(out)+1))
				b.WriteString(fenceStr + "\n" + string(out) + fenceStr + "\n")
			} else {
				b.Write(out)
			}
			_, err = io.WriteString(e.stdout, b.String())
			return err
		})
	})
	if err != nil {
		return err
	}
	if n == 0 && !failed {
		return errors.New(noEnvelope(files))
	}
	if failed {
		return failedError{}
	}
	return nil
}

func longestBacktickRun(b []byte) int {
	longest, run := 0, 0
	for _, c := range b {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// loadVerifyKey loads a public key file for verify --key. A PEM key has no
// key id; it gets a placeholder (the envelope's sig line names the id).
func loadVerifyKey(path string) (*signing.PublicKey, error) {
	k, err := signing.LoadPublicKey(path, "")
	if errors.Is(err, signing.ErrNoKeyID) {
		k, err = signing.LoadPublicKey(path, "pem-key")
	}
	return k, err
}

// verifyJSON is verify --json's line per envelope.
type verifyJSON struct {
	Status  string `json:"status"`
	Pkid    string `json:"pkid,omitempty"`
	Alg     string `json:"alg,omitempty"`
	Message string `json:"message"`
}

// statusMessage explains a result to a person (docs/signing.md §5).
func statusMessage(r signing.Result) string {
	switch r.Status {
	case signing.StatusVerified:
		m := "signature verified"
		switch r.Source {
		case signing.SourceExplicit:
			m += " with the given key"
		case signing.SourceDNS:
			m += " with the key published in DNS"
		case signing.SourceManual:
			m += " with the key you added"
		default:
			m += " with the pinned key"
		}
		if r.Key != nil {
			m += " " + r.Key.Fingerprint()
		}
		if r.Revocation {
			m += "; this REVOKE revoked the key " + r.Pkid + " in the trust store"
		}
		return m
	case signing.StatusFirstUse:
		m := "signature verified with the key the envelope announces; pinned " + r.Key.Fingerprint() + " for " + r.Pkid
		if r.Revocation {
			m += "; this REVOKE revoked it at once"
		}
		return m
	case signing.StatusUnsigned:
		return "not signed"
	}
	if r.Err != nil {
		return r.Err.Error()
	}
	return string(r.Status)
}

func runVerify(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Verify checks the signature of every envelope found in the input and prints one
line per envelope with its status:

  verified       the signature is good and the key is the one pinned for the
                 key id (or published in DNS, or given with --key)
  first-use      good signature by the key the envelope announces, for a key id
                 never seen before: the key is pinned now
  key-changed    good signature by the announced key, but another key is pinned
                 for the key id: rejected until you re-pin (crosstalk trust pin)
  bad-signature  the envelope was altered, or the signature is malformed
  unknown-key    no key known for the key id, and none announced
  revoked        signed by a key that was revoked
  unsigned       no signature (sig: none)

With --key, only that key is tried: a signature by another key is
bad-signature, and nothing is pinned. A verified REVOKE envelope (meta: revoke
Pkid: …, signed by that key) marks the key revoked in the trust store.

Exit status: 0 if every envelope is verified or first-use, 1 otherwise (or when
no envelope is found, or the trust store cannot be read or parsed: then the
error names the file and nothing is verified), 2 for usage errors.`)
	trustPath := trustFlag(fs)
	keyPath := fs.String("key", "", "public key `file`: the only key tried")
	noTOFU := fs.Bool("no-tofu", false, "do not pin keys on first use (announced keys give unknown-key)")
	dns := fs.Bool("dns", false, "look keys up in DNS (TXT name._crosstalk-key.domain)")
	asJSON := fs.Bool("json", false, `print {"status","pkid","alg","message"} per envelope (JSON Lines)`)
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *keyPath != "" && *dns {
		// With --key only that key is tried: DNS would never be asked.
		return usagef("verify: --key and --dns exclude each other: --key tries only the key given")
	}
	v := &signing.Verifier{NoTOFU: *noTOFU}
	if *trustPath != "" {
		v.Store = signing.NewTrustStore(*trustPath)
		// A store that cannot be read is the fault, not the envelopes':
		// every one would be unknown-key, with a hint to ask the sender.
		if _, err := v.Store.Entries(); err != nil {
			return badTrustStore(err)
		}
	} else if *keyPath == "" {
		return usagef("verify: no trust store (%s); give --trust FILE or --key FILE", noTrustReason())
	}
	if *keyPath != "" {
		k, err := loadVerifyKey(*keyPath)
		if err != nil {
			return err
		}
		v.Keys = []*signing.PublicKey{k}
	}
	if *dns {
		v.DNS = signing.NewDNSKeys("")
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	n, bad := 0, false
	var hints []string
	err = eachInput(e, files, func(in input) error {
		return readEnvelopes(in, false, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
			n++
			if se != nil {
				bad = true
				if *asJSON {
					return enc.Encode(verifyJSON{Status: "malformed", Message: se.Error()})
				}
				_, err := fmt.Fprintln(e.stdout, visible(fmt.Sprintf("%s:%d: malformed: %s", in.name, se.Line, se.Msg)))
				return err
			}
			r := v.Verify(ctx, env)
			if errors.Is(r.Err, signing.ErrTrustStore) {
				return badTrustStore(r.Err) // it broke while we read
			}
			if !r.Status.OK() {
				bad = true
			}
			switch r.Status {
			case signing.StatusKeyChanged:
				hints = append(hints, fmt.Sprintf("if %s really changed its key, re-pin it: crosstalk trust pin %s --from %s", r.Pkid, r.Pkid, in.name))
			case signing.StatusUnknownKey:
				if r.Key != nil && *noTOFU {
					hints = append(hints, "the key is announced; to trust it, run verify without --no-tofu or add it with crosstalk trust add")
				} else if r.Key == nil {
					hints = append(hints, "ask the sender for the public key (crosstalk trust add), or to sign with --announce")
				}
			}
			msg := statusMessage(r)
			if r.Status == signing.StatusVerified && r.Source == signing.SourceExplicit && r.Key != nil &&
				r.Key.Pkid != "pem-key" && r.Key.Pkid != r.Pkid {
				// The sig line's key id is not signed: anyone can write
				// another over a signature. Say whose key verified it.
				msg += fmt.Sprintf("; the given key is %s's, and the sig line's key id %s is not signed", r.Key.Pkid, r.Pkid)
			}
			if *asJSON {
				return enc.Encode(verifyJSON{Status: string(r.Status), Pkid: r.Pkid, Alg: string(r.Alg), Message: msg})
			}
			line := fmt.Sprintf("%s:%d: %s %s→%s", in.name, env.Line, r.Status, env.From, env.To)
			if r.Pkid != "" {
				line += " pkid=" + r.Pkid
			}
			if r.Alg != "" {
				line += " alg=" + string(r.Alg)
			}
			if r.Status != signing.StatusUnsigned {
				line += ": " + msg
			}
			_, err := fmt.Fprintln(e.stdout, visible(line))
			return err
		})
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New(noEnvelope(files))
	}
	seen := map[string]bool{}
	for _, h := range hints {
		if !seen[h] && !*asJSON {
			fmt.Fprintln(e.stderr, "hint: "+h)
		}
		seen[h] = true
	}
	if bad {
		return failedError{}
	}
	return nil
}

// badTrustStore is the error of a trust store that cannot be read or
// parsed (err names the file and, for a bad line, the line).
func badTrustStore(err error) error {
	return withHint(err, "fix or move the trust store file (a missing file is an empty store), or give another with --trust FILE")
}

// trustEntryJSON is trust list --json's line per entry.
type trustEntryJSON struct {
	Pkid        string    `json:"pkid"`
	Alg         string    `json:"alg"`
	Key         string    `json:"key"`
	Fingerprint string    `json:"fingerprint"`
	Source      string    `json:"source"`
	FirstSeen   time.Time `json:"first_seen"`
	Revoked     bool      `json:"revoked"`
	Sender      string    `json:"sender,omitempty"`
	Seen        string    `json:"seen,omitempty"`
}

// parseKeyArg reads KEY for trust add/pin: a public key file, the public
// key line keygen prints (`ed25519 ID base64`, read like the file), or an
// `alg:base64` value (then pkid is required).
func parseKeyArg(arg, pkid string) (*signing.PublicKey, error) {
	if privateKeyText(arg) {
		// Never echoed: the private key is not printed (docs/signing.md §4).
		return nil, usagef("trust: that is a private key; give the public key (the FILE.pub keygen wrote, or the line it printed) and keep the private key to yourself")
	}
	if _, err := os.Stat(arg); err == nil {
		k, err := signing.LoadPublicKey(arg, pkid)
		if errors.Is(err, signing.ErrNoKeyID) {
			return nil, withHint(err, "give the key id with --pkid ID")
		}
		return k, err
	}
	if f := strings.Fields(arg); len(f) == 3 {
		if _, err := signing.ParseAlg(f[0]); err == nil {
			k, err := signing.ParsePublicKey([]byte(arg), pkid)
			if err != nil {
				return nil, usagef("trust: %q is not a public key line (alg key-id base64): %v", arg, err)
			}
			return k, nil
		}
	}
	if pkid == "" {
		return nil, usagef("trust: %q is not a key file; for an alg:base64 key give --pkid ID", arg)
	}
	k, err := signing.ParsePublicKeyValue(pkid, arg)
	if err != nil {
		return nil, usagef("trust: %q is neither a key file nor an alg:base64 key: %v", arg, err)
	}
	return k, nil
}

// privateKeyText reports whether s holds a private key rather than a
// public one: a line whose tag is `ALG-private` (a key file's key line,
// alone or with its file), or a PEM private key.
func privateKeyText(s string) bool {
	if strings.Contains(s, "PRIVATE KEY") {
		return true
	}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		tag, _, _ := strings.Cut(f[0], ":")
		if strings.HasSuffix(strings.ToLower(tag), "-private") {
			return true
		}
	}
	return false
}

func runTrust(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Trust shows and changes the trust store: the key pinned for each key id
(like ssh's known_hosts; see docs/signing.md §5).

  list                         every pinned key (--json: JSON Lines)
  add KEY [--pkid ID]          pin a key by hand; KEY is a public key file
                               (from crosstalk keygen, or PEM with --pkid),
                               the public key line keygen prints (quoted), or
                               alg:base64 with --pkid. Fails if the key id is
                               pinned to another key: use pin.
  remove PKID                  forget the key of PKID
  revoke PKID                  mark the key of PKID revoked
  pin PKID KEY                 replace the key of PKID (after key-changed)
  pin PKID --from FILE         replace it with the key announced by the
                               envelope in FILE signed by PKID

Exit status: 0 on success, 1 on failure, 2 for usage errors.`)
	trustPath := trustFlag(fs)
	pkidFlag := fs.String("pkid", "", "key `id` for a PEM or alg:base64 key")
	from := fs.String("from", "", "pin: take the key announced by the envelope in `file`")
	asJSON := fs.Bool("json", false, "list: print JSON Lines")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("trust: want a subcommand: list, add, remove, revoke or pin")
	}
	store, err := openTrust(*trustPath)
	if err != nil {
		return err
	}
	sub, rest := pos[0], pos[1:]
	*pkidFlag = cliPkid(*pkidFlag)
	want := func(n int, synopsis string) error {
		if len(rest) != n {
			return usagef("trust %s: usage: crosstalk trust %s", sub, synopsis)
		}
		return nil
	}
	switch sub {
	case "list":
		if err := want(0, "list [--json]"); err != nil {
			return err
		}
		entries, err := store.Entries()
		if err != nil {
			return err
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		for _, en := range entries {
			if *asJSON {
				if err := enc.Encode(trustEntryJSON{Pkid: en.Key.Pkid, Alg: string(en.Key.Alg()), Key: en.Key.Value(), Fingerprint: en.Key.Fingerprint(),
					Source: string(en.Source), FirstSeen: en.FirstSeen, Revoked: en.Revoked, Sender: en.Sender, Seen: en.Seen}); err != nil {
					return err
				}
				continue
			}
			state := "active"
			if en.Revoked {
				state = "REVOKED"
			}
			line := fmt.Sprintf("%s  %s %s  %s  first seen %s  %s", en.Key.Pkid, en.Key.Alg(), en.Key.Fingerprint(), en.Source, en.FirstSeen.Format(time.RFC3339), state)
			if en.Sender != "" {
				line += "  from " + en.Sender
			}
			if en.Seen != "" {
				line += "  seen from " + en.Seen
			}
			if _, err := fmt.Fprintln(e.stdout, visible(line)); err != nil {
				return err
			}
		}
		if len(entries) == 0 && !*asJSON {
			fmt.Fprintf(e.stderr, "crosstalk: no keys in %s\n", store.Path())
		}
		return nil
	case "add":
		if err := want(1, "add KEY [--pkid ID]"); err != nil {
			return err
		}
		k, err := parseKeyArg(rest[0], *pkidFlag)
		if err != nil {
			return err
		}
		if err := store.Add(k); err != nil {
			if errors.Is(err, signing.ErrKeyChanged) {
				return withHint(err, "to replace the pinned key on purpose: crosstalk trust pin "+k.Pkid+" KEY")
			}
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "added %s %s %s\n", k.Pkid, k.Alg(), k.Fingerprint())
		return err
	case "remove", "revoke":
		if err := want(1, sub+" PKID"); err != nil {
			return err
		}
		pkid := rest[0]
		if _, ok, _ := store.Lookup(pkid); !ok {
			// Exactly as given for a pin a store holds from before key
			// ids were read in NFC; else in NFC.
			pkid = cliPkid(pkid)
		}
		if sub == "remove" {
			err = store.Remove(pkid)
		} else {
			err = store.Revoke(pkid, nil)
		}
		if errors.Is(err, signing.ErrUnknownKey) {
			return withHint(err, "crosstalk trust list shows the pinned key ids")
		}
		if err != nil {
			return err
		}
		verb := map[string]string{"remove": "removed", "revoke": "revoked"}[sub]
		_, err = fmt.Fprintf(e.stdout, "%s %s\n", verb, pkid)
		return err
	case "pin":
		if len(rest) > 0 {
			rest[0] = cliPkid(rest[0])
		}
		var k *signing.PublicKey
		switch {
		case *from != "" && len(rest) == 1:
			k, err = announcedFrom(*from, rest[0])
		case *from == "" && len(rest) == 2:
			k, err = parseKeyArg(rest[1], rest[0])
		default:
			return usagef("trust pin: usage: crosstalk trust pin PKID KEY, or crosstalk trust pin PKID --from FILE")
		}
		if err != nil {
			return err
		}
		k.Pkid = rest[0]
		old, had, err := store.Lookup(k.Pkid)
		if err != nil {
			return err
		}
		if err := store.Pin(k); err != nil {
			return err
		}
		msg := fmt.Sprintf("pinned %s to %s %s", k.Pkid, k.Alg(), k.Fingerprint())
		if had && !old.Key.Equal(k) {
			msg += " (was " + old.Key.Fingerprint() + ")"
		}
		_, err = fmt.Fprintln(e.stdout, msg)
		return err
	}
	return usagef("trust: unknown subcommand %q (want list, add, remove, revoke or pin)", sub)
}

// announcedFrom returns the key announced (meta: signing Public-Key) by an
// envelope in path that is signed by pkid and verifies under that key.
func announcedFrom(path, pkid string) (*signing.PublicKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := envelope.NewReader(f)
	var malformed []string // what is wrong with the envelopes not read
	for {
		env, err := r.Next()
		if err == io.EOF {
			break
		}
		var se *envelope.SyntaxError
		if errors.As(err, &se) {
			malformed = append(malformed, visible(fmt.Sprintf("%s:%d: %s: %s", path, se.Line, se.Code, se.Msg)))
			continue
		}
		if err != nil {
			return nil, err
		}
		val, ok := env.MetaValue("signing", "Public-Key")
		if !ok {
			continue
		}
		k, err := signing.ParsePublicKeyValue(pkid, val)
		if err != nil {
			continue
		}
		if res := signing.Verify(env, k); res.Status == signing.StatusVerified && res.Pkid == pkid {
			return k, nil
		}
	}
	if len(malformed) > 0 {
		// The envelope meant may be among them: say why it was not read,
		// not that it is unsigned.
		return nil, withHint(fmt.Errorf("no envelope in %s is signed by %s with the key it announces; %d could not be read:\n%s", path, pkid, len(malformed), strings.Join(malformed, "\n")),
			"fix the envelope (crosstalk parse "+path+" shows every error), or ask the sender for it again")
	}
	return nil, withHint(fmt.Errorf("no envelope in %s is signed by %s with the key it announces", path, pkid),
		"ask the sender to sign with crosstalk sign --announce, or pin the key file: crosstalk trust pin "+pkid+" KEYFILE")
}
