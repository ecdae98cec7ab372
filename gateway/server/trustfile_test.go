package server_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/signing"
)

// TestOpenCoreBadTrustFile: a trust file the relay cannot read or parse
// stops it at start, naming the file (it started, and took every key for
// unknown without a word); read as a directory, too.
func TestOpenCoreBadTrustFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("\x00\xffnot a key line\n"), 0o600) }, "line 1"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			trust := filepath.Join(dir, "known_keys")
			if err := tc.make(trust); err != nil {
				t.Fatal(err)
			}
			c, err := server.OpenCore(t.Context(), &server.Options{DataDir: dir, TrustFile: trust})
			if err == nil {
				c.Close()
				t.Fatal("OpenCore with a bad trust file = nil error")
			}
			if !strings.Contains(err.Error(), trust) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenCore = %v; want the file %s and %q", err, trust, tc.want)
			}
		})
	}
}

// TestTrustFileTurnsBad: when the trust file turns bad while the relay
// runs, the relay logs an error naming it once, keeps verifying with the
// last good version (a revoked key stays revoked, a pin stays in force:
// before, every signature became unknown-key and was accepted, silently),
// refuses first uses (a pin would rewrite the file), and says so in the
// log when the file is fixed (docs/signing.md §5).
func TestTrustFileTurnsBad(t *testing.T) {
	dir := t.TempDir()
	trust := filepath.Join(dir, "known_keys")
	var logs syncBuffer
	c, err := server.OpenCore(t.Context(), &server.Options{DataDir: dir, TrustFile: trust,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sign := func(pkid string, announce bool) ([]byte, *signing.PrivateKey) {
		k, err := signing.GenerateKey(signing.Ed25519, pkid)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := envelope.Marshal(envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "from "+pkid))
		out, err := signing.Sign(text, k, &signing.SignOptions{Announce: announce})
		if err != nil {
			t.Fatal(err)
		}
		return out, k
	}
	ingest := func(text []byte) gateway.Outcome {
		t.Helper()
		outs, err := c.Relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: bytes.NewReader(text)})
		if err != nil || len(outs) != 1 {
			t.Fatalf("Ingest = %+v, %v", outs, err)
		}
		return outs[0]
	}
	pinned, kp := sign("pinned@example.com", false)
	revoked, kr := sign("revoked@example.com", false)
	for _, k := range []*signing.PrivateKey{kp, kr} {
		if err := c.Trust.Add(k.Public()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Trust.Revoke("revoked@example.com", nil); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(trust)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trust, append(append([]byte(nil), good...), "garbage\n"...), 0o600); err != nil {
		t.Fatal(err)
	}

	if o := ingest(pinned); !o.Accepted() || o.Verification.Status != gateway.StatusVerified {
		t.Errorf("pinned key with a bad trust file: %+v %+v; want verified", o.Reject, o.Verification)
	}
	if o := ingest(revoked); o.Accepted() || o.Verification.Status != gateway.StatusRevoked {
		t.Errorf("revoked key with a bad trust file: %+v %+v; want refused as revoked", o.Reject, o.Verification)
	}
	firstUse, _ := sign("new@example.com", true)
	if o := ingest(firstUse); o.Accepted() || !strings.Contains(o.Reject.Reason, "bad trust store") {
		t.Errorf("first use with a bad trust file: %+v %+v; want refused, naming the store", o.Reject, o.Verification)
	}
	log := logs.String()
	if n := strings.Count(log, "level=ERROR msg=\"trust store unreadable"); n != 1 || !strings.Contains(log, "file="+trust) || !strings.Contains(log, "line ") {
		t.Errorf("log has %d trust store errors, want 1 naming %s and the line:\n%s", n, trust, log)
	}

	if err := os.WriteFile(trust, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if o := ingest(firstUse); !o.Accepted() || o.Verification.Status != gateway.StatusFirstUse {
		t.Errorf("first use once the file is fixed: %+v %+v", o.Reject, o.Verification)
	}
	if !strings.Contains(logs.String(), "trust store readable again") {
		t.Errorf("no log line on the fixed trust file:\n%s", logs.String())
	}
}
