// Package signing signs and verifies AI Crosstalk envelopes and keeps track
// of whom to trust (docs/design.md §4, docs/signing.md).
//
// What it does:
//
//   - computes the signed bytes of an envelope from its source text
//     ([envelope.Envelope.Source]), never from a re-serialization: line ends
//     made LF, fences and quote prefixes removed (by the Reader), NFC, the
//     lines from the header up to, not including, the first column-0 `sig:`
//     or `[[END]]` line, each LF-terminated ([Payload], docs/design.md §4.1);
//   - signs the detached-JWS signing input
//     b64url(protected) "." b64url(payload) with Ed25519 (alg EdDSA) or
//     ECDSA P-256 (ES256, r‖s), using the fixed protected headers of
//     [ProtectedHeader]; the published canon-v1.1-rc1 vectors pass bit for
//     bit and are reproduced by re-signing;
//   - verifies Ed25519 signatures with curve25519-voi under exactly the
//     rules of crypto/ed25519 (cofactorless, S below the group order, any
//     A and R), keeping each public key's precomputed form in a bounded
//     cache: about half the time of crypto/ed25519.Verify
//     (docs/signing.md §10); signing uses crypto/ed25519;
//   - reads and writes the `sig:` line forms of docs/design.md §4.2 ([ParseSig],
//     [Sig.String]) and replaces or adds the `sig:` line of an envelope
//     ([Sign], [SignEnvelope]), optionally announcing the public key in a
//     signed `meta: signing` block;
//   - reads and writes key files, including PKCS#8/SPKI PEM imports
//     ([ParsePrivateKey], [LoadPrivateKey], [WritePrivateKeyFile]);
//   - decides trust: a known_keys-like [TrustStore] with first-use pinning,
//     key-change rejection, manual re-pinning and revocation, DNS TXT keys
//     ([DNSKeys], cached by TTL; [LookupDNSKeys]) and REVOKE envelopes, and reports the outcome as a
//     [Result] with a [Status] rather than an error string ([Verifier]).
//
// What it does not do: it does not parse envelopes (package envelope does),
// does not use a generic JOSE library (they reject the `crit` header of
// docs/design.md §4.1), does not do DID-based trust (the spec's "future extension"),
// and never logs or prints private keys.
//
// Domain separation: the STYLE guide asks for a fixed context prefix like
// ed25519's Options.Context. Ed25519ctx, or any prefix added to the signing
// input, would break the published vectors, which define the signing input
// exactly. The protected header plays that role instead: every signing
// input starts with the base64url of a header naming `cty:
// "crosstalk/v1.1"` and `ver: "1.1-rc1"`, so a Crosstalk signature is never
// a valid signature over a bare message or a JWS of another content type.
//
// Departures from the seed specification: the seed's sig line carries
// "base64" signatures; this package writes unpadded base64url and accepts
// all four base64 flavours. The seed's canonicalization appendix says
// "header order strict" and "two-space body indent"; this package signs the
// lines verbatim as received (docs/design.md §4.1), so an envelope in any field
// order verifies, and nothing is re-indented.
package signing
