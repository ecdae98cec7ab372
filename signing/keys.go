package signing

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// Alg is a signature algorithm, named as in the sig: line.
type Alg string

// The supported algorithms (docs/design.md §4.2).
const (
	// Ed25519 is EdDSA over Curve25519 (JOSE "EdDSA"), the default.
	Ed25519 Alg = "ed25519"
	// SECP256R1 is ECDSA over P-256 with SHA-256 (JOSE "ES256"); the
	// signature is r‖s, 64 bytes, not DER.
	SECP256R1 Alg = "secp256r1"
)

// ParseAlg parses an algorithm name: ed25519 or secp256r1, in any case, or
// their JOSE names EdDSA and ES256.
func ParseAlg(s string) (Alg, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "ed25519", "eddsa":
		return Ed25519, nil
	case "secp256r1", "es256", "p-256", "p256":
		return SECP256R1, nil
	}
	return "", fmt.Errorf("%w %q (want ed25519 or secp256r1)", ErrUnsupportedAlg, s)
}

// JOSE returns the JOSE "alg" name of a: EdDSA or ES256.
func (a Alg) JOSE() string {
	switch a {
	case Ed25519:
		return "EdDSA"
	case SECP256R1:
		return "ES256"
	}
	return ""
}

// PublicKey is a public key with the key id (pkid) it is known by. Key is
// an ed25519.PublicKey or a P-256 *ecdsa.PublicKey.
type PublicKey struct {
	Pkid string
	Key  crypto.PublicKey
}

// NewPublicKey returns key under pkid after checking that key is a usable
// Ed25519 or P-256 key and pkid a valid key id (docs/signing.md §4).
func NewPublicKey(pkid string, key crypto.PublicKey) (*PublicKey, error) {
	if err := checkPkid(pkid); err != nil {
		return nil, err
	}
	switch k := key.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: ed25519 public key is %d bytes, want %d", ErrKeyFile, len(k), ed25519.PublicKeySize)
		}
		if err := checkEd25519Point(k); err != nil {
			return nil, err
		}
		return &PublicKey{Pkid: pkid, Key: k}, nil
	case *ecdsa.PublicKey:
		if k == nil || k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ECDSA key is not on P-256", ErrUnsupportedAlg)
		}
		return &PublicKey{Pkid: pkid, Key: k}, nil
	}
	return nil, fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, key)
}

// Alg returns the key's algorithm, or "" if Key is of no supported type.
func (k *PublicKey) Alg() Alg {
	if k == nil {
		return ""
	}
	switch c := k.Key.(type) {
	case ed25519.PublicKey:
		return Ed25519
	case *ecdsa.PublicKey:
		if c != nil && c.Curve == elliptic.P256() {
			return SECP256R1
		}
	}
	return ""
}

// Bytes returns the raw key: 32 bytes for Ed25519, the 65-byte uncompressed
// point for P-256; nil for an unusable key.
func (k *PublicKey) Bytes() []byte {
	switch k.Alg() {
	case Ed25519:
		return bytes.Clone(k.Key.(ed25519.PublicKey))
	case SECP256R1:
		b, err := k.Key.(*ecdsa.PublicKey).Bytes()
		if err != nil {
			return nil
		}
		return b
	}
	return nil
}

// Equal reports whether k and o are the same key material (key ids are not
// compared).
func (k *PublicKey) Equal(o *PublicKey) bool {
	if k == nil || o == nil || k.Alg() == "" || k.Alg() != o.Alg() {
		return false
	}
	return bytes.Equal(k.Bytes(), o.Bytes())
}

// Value returns the key as `alg:<base64url>`, the form of the `meta:
// signing` Public-Key field and of `crosstalk trust add`.
func (k *PublicKey) Value() string { return string(k.Alg()) + ":" + b64url(k.Bytes()) }

// Fingerprint returns "SHA256:" and the unpadded standard base64 of the
// SHA-256 of the raw key, for showing to people (as ssh does).
func (k *PublicKey) Fingerprint() string {
	sum := sha256.Sum256(k.Bytes())
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// String returns the key file line: `alg pkid base64url`.
func (k *PublicKey) String() string {
	return string(k.Alg()) + " " + k.Pkid + " " + b64url(k.Bytes())
}

// ParsePublicKeyValue parses `alg:<base64>` (the Public-Key field, any
// base64 flavour) as the key of pkid. Errors wrap ErrKeyFile,
// ErrUnsupportedAlg or ErrKeyID.
func ParsePublicKeyValue(pkid, s string) (*PublicKey, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return nil, fmt.Errorf("%w: want alg:base64, got %q", ErrKeyFile, s)
	}
	alg, err := ParseAlg(a)
	if err != nil {
		return nil, err
	}
	raw, err := decodeB64(strings.TrimSpace(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyFile, err)
	}
	return publicFromRaw(alg, pkid, raw)
}

func publicFromRaw(alg Alg, pkid string, raw []byte) (*PublicKey, error) {
	switch alg {
	case Ed25519:
		if len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: ed25519 public key is %d bytes, want %d", ErrKeyFile, len(raw), ed25519.PublicKeySize)
		}
		return NewPublicKey(pkid, ed25519.PublicKey(raw))
	case SECP256R1:
		k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
		if err != nil {
			return nil, fmt.Errorf("%w: secp256r1 public key: want a 65-byte uncompressed point: %v", ErrKeyFile, err)
		}
		return NewPublicKey(pkid, k)
	}
	return nil, fmt.Errorf("%w %q", ErrUnsupportedAlg, alg)
}

// PrivateKey is a private key with its key id. Key is an ed25519.PrivateKey
// or a P-256 *ecdsa.PrivateKey. Its String and GoString methods never show
// the key material.
type PrivateKey struct {
	Pkid string
	Key  crypto.Signer
}

// GenerateKey returns a new key of alg for pkid.
func GenerateKey(alg Alg, pkid string) (*PrivateKey, error) {
	if err := checkPkid(pkid); err != nil {
		return nil, err
	}
	switch alg {
	case Ed25519:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("signing: generating key: %w", err)
		}
		return &PrivateKey{Pkid: pkid, Key: priv}, nil
	case SECP256R1:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("signing: generating key: %w", err)
		}
		return &PrivateKey{Pkid: pkid, Key: priv}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnsupportedAlg, alg)
}

// NewPrivateKey returns key under pkid after checking that it is an Ed25519
// or P-256 key and pkid a valid key id.
func NewPrivateKey(pkid string, key crypto.Signer) (*PrivateKey, error) {
	if err := checkPkid(pkid); err != nil {
		return nil, err
	}
	switch k := key.(type) {
	case ed25519.PrivateKey:
		if len(k) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("%w: ed25519 private key is %d bytes, want %d", ErrKeyFile, len(k), ed25519.PrivateKeySize)
		}
	case *ecdsa.PrivateKey:
		if k == nil || k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ECDSA key is not on P-256", ErrUnsupportedAlg)
		}
	default:
		return nil, fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, key)
	}
	return &PrivateKey{Pkid: pkid, Key: key}, nil
}

// Alg returns the key's algorithm, or "" if Key is of no supported type.
func (k *PrivateKey) Alg() Alg {
	if k == nil {
		return ""
	}
	switch c := k.Key.(type) {
	case ed25519.PrivateKey:
		if len(c) == ed25519.PrivateKeySize {
			return Ed25519
		}
	case *ecdsa.PrivateKey:
		if c != nil && c.Curve == elliptic.P256() {
			return SECP256R1
		}
	}
	return ""
}

// Public returns the public half of k, with the same key id.
func (k *PrivateKey) Public() *PublicKey {
	return &PublicKey{Pkid: k.Pkid, Key: k.Key.Public()}
}

// String describes the key without its key material.
// It has a value receiver so that printing a PrivateKey value is safe too.
func (k PrivateKey) String() string {
	return fmt.Sprintf("%s private key %s (redacted)", k.Alg(), k.Pkid)
}

// GoString is String: %#v must not print the key material either.
func (k PrivateKey) GoString() string { return k.String() }

// SignPayload signs payload (see Payload) with k and returns the raw
// signature: 64 bytes for both algorithms (Ed25519; ES256 as r‖s).
// Signatures are deterministic (Ed25519; RFC 6979 for ES256), so signing
// the same payload twice gives the same bytes.
func SignPayload(k *PrivateKey, payload []byte) ([]byte, error) {
	input := SigningInput(k.Alg(), payload)
	if input == nil {
		return nil, fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, k.Key)
	}
	return signInput(k, input)
}

func signInput(k *PrivateKey, input []byte) ([]byte, error) {
	switch key := k.Key.(type) {
	case ed25519.PrivateKey:
		return ed25519.Sign(key, input), nil
	case *ecdsa.PrivateKey:
		h := sha256.Sum256(input)
		der, err := key.Sign(nil, h[:], crypto.SHA256) // nil: RFC 6979
		if err != nil {
			return nil, fmt.Errorf("signing: ES256: %w", err)
		}
		var rs struct{ R, S *big.Int }
		if _, err := asn1.Unmarshal(der, &rs); err != nil {
			return nil, fmt.Errorf("signing: ES256: %w", err)
		}
		sig := make([]byte, 64)
		rs.R.FillBytes(sig[:32])
		rs.S.FillBytes(sig[32:])
		return sig, nil
	}
	return nil, fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, k.Key)
}

// VerifyPayload checks sig, a raw 64-byte signature, over payload under k.
// It returns nil or an error wrapping ErrBadSignature (or
// ErrUnsupportedAlg for an unusable key).
func VerifyPayload(k *PublicKey, payload, sig []byte) error {
	input := SigningInput(k.Alg(), payload)
	if input == nil {
		return fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, k.Key)
	}
	if !verifyInput(k, input, sig) {
		return fmt.Errorf("%w under %s key %s", ErrBadSignature, k.Alg(), k.Pkid)
	}
	return nil
}

func verifyInput(k *PublicKey, input, sig []byte) bool {
	if len(sig) != 64 {
		return false
	}
	switch key := k.Key.(type) {
	case ed25519.PublicKey:
		return verifyEd25519(key, input, sig)
	case *ecdsa.PublicKey:
		if key == nil || key.Curve != elliptic.P256() {
			return false
		}
		h := sha256.Sum256(input)
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(key, h[:], r, s)
	}
	return false
}

// Key files (docs/signing.md §4): text, `#` comments, one key per file, one
// line `tag pkid base64url`. Tags: ed25519, secp256r1 (public keys),
// ed25519-private, secp256r1-private (private keys: the 32-byte Ed25519
// seed or P-256 scalar). PEM files (PKCS#8 private keys, SPKI public keys)
// are read too; they carry no key id.

const privateSuffix = "-private"

// MarshalPublicKey returns the key file text for k.
func MarshalPublicKey(k *PublicKey) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# crosstalk public key (docs/signing.md §4)\n# fingerprint: %s\n%s\n", k.Fingerprint(), k)
	return b.Bytes()
}

// MarshalPrivateKey returns the key file text for k. Write it only to a
// file only its owner can read (WritePrivateKeyFile does).
func MarshalPrivateKey(k *PrivateKey, created time.Time) ([]byte, error) {
	var raw []byte
	switch key := k.Key.(type) {
	case ed25519.PrivateKey:
		raw = key.Seed()
	case *ecdsa.PrivateKey:
		var err error
		if raw, err = key.Bytes(); err != nil {
			return nil, fmt.Errorf("signing: %w", err)
		}
	default:
		return nil, fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, k.Key)
	}
	if err := checkPkid(k.Pkid); err != nil {
		return nil, err
	}
	pub := k.Public()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# crosstalk private key: keep it secret, mode 0600 (docs/signing.md §4)\n")
	fmt.Fprintf(&b, "# created: %s\n", created.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "# public key: %s\n", pub)
	fmt.Fprintf(&b, "%s%s %s %s\n", k.Alg(), privateSuffix, k.Pkid, b64url(raw))
	return b.Bytes(), nil
}

// WritePrivateKeyFile writes k to a new file at path with mode 0600. It
// fails if the file exists.
func WritePrivateKeyFile(path string, k *PrivateKey) error {
	data, err := MarshalPrivateKey(k, time.Now())
	if err != nil {
		return err
	}
	return writeNewFile(path, data, 0o600)
}

// WritePublicKeyFile writes k to a new file at path with mode 0644. It fails
// if the file exists.
func WritePublicKeyFile(path string, k *PublicKey) error {
	return writeNewFile(path, MarshalPublicKey(k), 0o644)
}

// writeNewFile creates path holding data with mode perm, never replacing
// an existing file (or symlink): ErrExist then. The data goes to a
// temporary file in the same directory, synced, then hard-linked to path,
// so path never holds part of a key — not after a failed write, not after
// a crash. Where the file system has no hard links it falls back to
// writing path itself (O_EXCL), removing it if the write fails.
func writeNewFile(path string, data []byte, perm os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("signing: %s is a directory: %w", path, fs.ErrExist)
		}
		return fmt.Errorf("signing: %s: %w", path, fs.ErrExist)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // named after the temporary file, not path
		}
		return fmt.Errorf("signing: creating %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name) // linked to path or not, the temporary name goes
	if err := writeSynced(tmp, data, perm); err != nil {
		return fmt.Errorf("signing: writing %s: %w", path, err)
	}
	err = os.Link(name, path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("signing: %s: %w", path, fs.ErrExist)
	default:
		// No hard links here (some network and FAT file systems).
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return fmt.Errorf("signing: %w", err)
		}
		if err := writeSynced(f, data, perm); err != nil {
			os.Remove(path)
			return fmt.Errorf("signing: writing %s: %w", path, err)
		}
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: not every system can sync a directory
		d.Close()
	}
	return nil
}

// writeSynced gives f mode perm (exactly, whatever the umask), writes
// data, syncs and closes it.
func writeSynced(f *os.File, data []byte, perm os.FileMode) error {
	err := f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// keyLine is the one key line of a key file.
type keyLine struct {
	tag, pkid, b64 string
	line           int
}

// parseKeyFile finds the single key line of a key file. PEM input returns
// a nil line and isPEM true.
func parseKeyFile(data []byte) (kl *keyLine, isPEM bool, err error) {
	if bytes.Contains(data, []byte("-----BEGIN ")) {
		return nil, true, nil
	}
	data = bytes.TrimPrefix(data, []byte(bom)) // saved by an editor that adds one
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	n := 0
	for sc.Scan() {
		n++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		if len(f) != 3 {
			return nil, false, fmt.Errorf("%w: line %d: want `alg key-id base64url`, got %d fields", ErrKeyFile, n, len(f))
		}
		if kl != nil {
			return nil, false, fmt.Errorf("%w: line %d: more than one key (one key per file; the first is on line %d)", ErrKeyFile, n, kl.line)
		}
		kl = &keyLine{tag: f[0], pkid: f[1], b64: f[2], line: n}
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrKeyFile, err)
	}
	if kl == nil {
		return nil, false, fmt.Errorf("%w: no key line", ErrKeyFile)
	}
	return kl, false, nil
}

// pemBlock decodes the PEM block of a key file; pkid, which PEM does not
// carry, must be given.
func pemBlock(data []byte, pkid string) (*pem.Block, error) {
	if pkid == "" {
		return nil, fmt.Errorf("%w: give one", ErrNoKeyID)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		return nil, fmt.Errorf("%w: bad PEM", ErrKeyFile)
	}
	return blk, nil
}

// ParsePublicKey parses a public key file (or PEM SPKI). A non-empty pkid
// replaces the key id of the file; it is required for PEM, which has none.
// Errors wrap ErrKeyFile, ErrUnsupportedAlg or ErrKeyID.
func ParsePublicKey(data []byte, pkid string) (*PublicKey, error) {
	kl, isPEM, err := parseKeyFile(data)
	if err != nil {
		return nil, err
	}
	if isPEM {
		blk, err := pemBlock(data, pkid)
		if err != nil {
			return nil, err
		}
		switch blk.Type {
		case "PUBLIC KEY":
		case "PRIVATE KEY":
			return nil, fmt.Errorf("%w: this is a private key, not a public key", ErrKeyFile)
		default:
			return nil, fmt.Errorf("%w: PEM block %q (want PUBLIC KEY)", ErrKeyFile, blk.Type)
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeyFile, err)
		}
		return NewPublicKey(pkid, k)
	}
	if strings.HasSuffix(kl.tag, privateSuffix) {
		return nil, fmt.Errorf("%w: line %d: this is a private key, not a public key", ErrKeyFile, kl.line)
	}
	alg, err := ParseAlg(kl.tag)
	if err != nil {
		return nil, within(err, "line %d", kl.line)
	}
	raw, err := decodeB64(kl.b64)
	if err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrKeyFile, kl.line, err)
	}
	if pkid == "" {
		pkid = kl.pkid
	}
	k, err := publicFromRaw(alg, pkid, raw)
	if err != nil {
		return nil, within(err, "line %d", kl.line)
	}
	return k, nil
}

// ParsePrivateKey parses a private key file (or a PEM PKCS#8 private key,
// the form of the published test key). A non-empty pkid replaces the key
// id of the file; it is required for PEM, which has none. Errors wrap
// ErrKeyFile, ErrUnsupportedAlg or ErrKeyID and never contain key material.
func ParsePrivateKey(data []byte, pkid string) (*PrivateKey, error) {
	kl, isPEM, err := parseKeyFile(data)
	if err != nil {
		return nil, err
	}
	if isPEM {
		blk, err := pemBlock(data, pkid)
		if err != nil {
			return nil, err
		}
		if blk.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("%w: PEM block %q (want PKCS#8 PRIVATE KEY)", ErrKeyFile, blk.Type)
		}
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: PKCS#8: %v", ErrKeyFile, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%w: key type %T", ErrUnsupportedAlg, k)
		}
		return NewPrivateKey(pkid, s)
	}
	tag, ok := strings.CutSuffix(kl.tag, privateSuffix)
	if !ok {
		return nil, fmt.Errorf("%w: line %d: this is a public key (tag %q), not a private key", ErrKeyFile, kl.line, kl.tag)
	}
	alg, err := ParseAlg(tag)
	if err != nil {
		return nil, within(err, "line %d", kl.line)
	}
	raw, err := decodeB64(kl.b64)
	if err != nil {
		return nil, fmt.Errorf("%w: line %d: private key is not valid base64", ErrKeyFile, kl.line)
	}
	if pkid == "" {
		pkid = kl.pkid
	}
	switch alg {
	case Ed25519:
		if len(raw) != ed25519.SeedSize {
			return nil, fmt.Errorf("%w: line %d: ed25519 private key is %d bytes, want %d", ErrKeyFile, kl.line, len(raw), ed25519.SeedSize)
		}
		return NewPrivateKey(pkid, ed25519.NewKeyFromSeed(raw))
	default: // SECP256R1
		k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), raw)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: secp256r1 private key is not a valid 32-byte scalar", ErrKeyFile, kl.line)
		}
		return NewPrivateKey(pkid, k)
	}
}

// LoadPrivateKey reads and parses the private key file at path (see
// ParsePrivateKey). On Unix it refuses a file that group or others may
// read or write, with ErrInsecureKeyFile.
func LoadPrivateKey(path, pkid string) (*PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is a directory, not a key file", ErrKeyFile, path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o (run chmod 600 %s)", ErrInsecureKeyFile, path, fi.Mode().Perm(), path)
	}
	data, err := readKeyFile(f, path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivateKey(data, pkid)
	if err != nil {
		return nil, within(err, "%s", path)
	}
	return k, nil
}

// LoadPublicKey reads and parses the public key file at path (see
// ParsePublicKey).
func LoadPublicKey(path, pkid string) (*PublicKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	defer f.Close()
	data, err := readKeyFile(f, path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePublicKey(data, pkid)
	if err != nil {
		return nil, within(err, "%s", path)
	}
	return k, nil
}

// maxKeyFile bounds what is read of a key file: a key is one line, and a
// file named by mistake (a log, /dev/zero) must not be read whole.
const maxKeyFile = 64 << 10

// readKeyFile reads the key file f (named path) up to maxKeyFile bytes;
// a larger one is an ErrKeyFile.
func readKeyFile(f *os.File, path string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("signing: reading %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%w: %s is larger than 64 KiB: not a key file", ErrKeyFile, path)
	}
	return data, nil
}

// checkPkid reports (with ErrKeyID) whether s can be a new key id: 1 to
// 256 bytes of printable text in Unicode NFC without blanks or `;` (the
// sig line separates parameters with `;` and the trust store columns with
// blanks), and without a character a person cannot see or that reorders
// the text around it — the characters envelope.NormalizeIdentifier
// refuses: a key id is shown to people as what a signature proves, so it
// may not look like another (docs/signing.md §4).
func checkPkid(s string) error {
	if err := checkStoredPkid(s); err != nil {
		return err
	}
	n, err := envelope.NormalizeIdentifier(s)
	var ie *envelope.IdentifierError
	if errors.As(err, &ie) {
		return fmt.Errorf("%w %s: %s (%U) is not allowed", ErrKeyID, strconv.QuoteToASCII(s), ie.Reason, ie.Rune)
	}
	if err != nil || n != s {
		return fmt.Errorf("%w %s: not in Unicode NFC", ErrKeyID, strconv.QuoteToASCII(s))
	}
	return nil
}

// checkStoredPkid is the older, looser rule a key id read from a trust
// store must meet: 1 to 256 bytes without blanks (any Unicode space: the
// store's columns are split at them), control characters or `;`, not
// starting with '#' (a comment line there). A store written before checkPkid's rule still loads; the key ids
// it refuses can no longer be named by a signature, made or pinned.
func checkStoredPkid(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrKeyID)
	}
	if len(s) > 256 {
		return fmt.Errorf("%w: longer than 256 bytes", ErrKeyID)
	}
	if s[0] == '#' {
		// Its trust store line would read back as a comment: the pin
		// would vanish, and any key would be a first use again.
		return fmt.Errorf("%w %q: may not start with '#'", ErrKeyID, s)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == ';' || r == '\uFFFD' || (r >= 0x80 && r <= 0x9f) || unicode.IsSpace(r) {
			return fmt.Errorf("%w %q: blanks, control characters and ';' are not allowed", ErrKeyID, s)
		}
	}
	return nil
}
