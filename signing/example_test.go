package signing_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/signing"
)

// testKey loads the published canon-v1.1-rc1 test key (PKCS#8 PEM).
func testKey() *signing.PrivateKey {
	pemData, err := fs.ReadFile(fixtures.SigningFS, "signing/canon-v1.1-rc1/private.pem")
	if err != nil {
		log.Fatal(err)
	}
	k, err := signing.ParsePrivateKey(pemData, "alice@example.com")
	if err != nil {
		log.Fatal(err)
	}
	return k
}

func ExampleSign() {
	text := "Please forward this:\r\n" +
		"```\r\n" +
		"[[ALICE→BOB v1]]\r\n" +
		"intent: REQUEST\r\n" +
		"\r\n" +
		"body: |\r\n" +
		"  Hello, Bob.\r\n" +
		"sig: none\r\n" +
		"[[END]]\r\n" +
		"```\r\n"
	signed, err := signing.Sign([]byte(text), testKey(), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(signed))
	// Output:
	// [[ALICE→BOB v1]]
	// intent: REQUEST
	//
	// body: |
	//   Hello, Bob.
	// sig: ed25519:pkid=alice@example.com;sig=rqGjy9cuZfgy5BlCPQF2Ngd7yb8V-Sj9F1U2-DNJRCEv9X0yDfqVL40ZrIXZOtiYUxkDHw4evQ_GsVNx6_0HAw
	// [[END]]
}

func ExampleVerify() {
	key := testKey()
	signed, err := signing.Sign([]byte("[[ALICE→BOB v1]]\nintent: REQUEST\n\nbody: |\n  Hello, Bob.\n[[END]]\n"), key, nil)
	if err != nil {
		log.Fatal(err)
	}
	// The envelope is pasted back quoted, with CRLF line ends, and edited.
	pasted := "> " + strings.ReplaceAll(strings.TrimSuffix(string(signed), "\n"), "\n", "\r\n> ") + "\r\n"
	edited := strings.Replace(pasted, "Hello", "Goodbye", 1)
	for _, text := range []string{pasted, edited} {
		env, err := envelope.NewReader(strings.NewReader(text)).Next()
		if err != nil {
			log.Fatal(err)
		}
		r := signing.Verify(env, key.Public())
		fmt.Println(r.Status, r.Pkid, r.Alg)
	}
	// Output:
	// verified alice@example.com ed25519
	// bad-signature alice@example.com ed25519
}

func ExampleTrustStore() {
	dir, err := os.MkdirTemp("", "crosstalk-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store := signing.NewTrustStore(filepath.Join(dir, "known_keys"))
	v := &signing.Verifier{Store: store}

	verify := func(k *signing.PrivateKey, text string) {
		signed, err := signing.Sign([]byte(text), k, &signing.SignOptions{Announce: true})
		if err != nil {
			log.Fatal(err)
		}
		env, err := envelope.NewReader(strings.NewReader(string(signed))).Next()
		if err != nil {
			log.Fatal(err)
		}
		r := v.Verify(context.Background(), env)
		fmt.Println(r.Status, r.Pkid, r.Revocation)
	}
	alice := testKey()
	verify(alice, "[[ALICE→BOB v1]]\nintent: REQUEST\n\nbody: |\n  first\n[[END]]\n")
	verify(alice, "[[ALICE→BOB v1]]\nintent: REQUEST\n\nbody: |\n  second\n[[END]]\n")

	// Somebody else claims the key id.
	mallory, err := signing.GenerateKey(signing.Ed25519, "alice@example.com")
	if err != nil {
		log.Fatal(err)
	}
	verify(mallory, "[[ALICE→BOB v1]]\nintent: REQUEST\n\nbody: |\n  trust me\n[[END]]\n")

	// Alice revokes her key; later signatures by it are revoked.
	verify(alice, "[[ALICE→ALL v1]]\nintent: REVOKE\n\nmeta: revoke\nPkid: alice@example.com\n\nbody: |\n  lost my laptop\n[[END]]\n")
	verify(alice, "[[ALICE→BOB v1]]\nintent: REQUEST\n\nbody: |\n  third\n[[END]]\n")

	entries, err := store.Entries()
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Key.Pkid, e.Key.Alg(), e.Source, e.Revoked)
	}
	// Output:
	// first-use alice@example.com false
	// verified alice@example.com false
	// key-changed alice@example.com false
	// verified alice@example.com true
	// revoked alice@example.com false
	// alice@example.com ed25519 tofu true
}

// ExampleDNSKeys verifies with keys published in DNS (docs/signing.md §6):
// a key id that names a domain and has no pin is looked up as TXT
// alice._crosstalk-key.example.com, and the answer is cached for its TTL.
// A key id without a domain never reaches DNS.
func ExampleDNSKeys() {
	keys := signing.NewDNSKeys("") // or "127.0.0.1:53"; "" asks the system's servers
	v := &signing.Verifier{
		Store: signing.NewTrustStore(filepath.Join(os.TempDir(), "example_known_keys")),
		DNS:   keys,
	}
	_ = v // v.Verify(ctx, env): verified, source dns, for a key DNS publishes
	_, err := keys.Lookup(context.Background(), "alice-2025")
	fmt.Println(errors.Is(err, signing.ErrNoDNSKey))
	// Output: true
}
