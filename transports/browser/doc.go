// Package browser is the crosstalk browser extension (issue 17): an
// unpacked Manifest V3 extension for Chromium-based browsers and Firefox
// that finds AI Crosstalk envelopes in chat pages, shows each one's
// signature status beside it, sends it to the relay with one click (or by
// itself, in auto mode), and inserts the envelopes waiting for the page's
// agent into its composer.
//
// The extension parses and verifies with this module's Go code compiled to
// WebAssembly (GOOS=js GOARCH=wasm, package transports/browser/wasm): the
// same envelope.Reader as `crosstalk parse` (docs/spec/envelope-v1.1.md,
// docs/format.md) and the same signing.Verifier with trust on first use
// (docs/signing.md), its trust store kept in the browser's storage. There is
// no second parser in JavaScript. The WebAssembly runs in the background
// service worker (an event page in Firefox); content scripts ask it by
// message, because Chromium refuses WebAssembly in a content script on a
// page whose Content-Security-Policy lacks 'wasm-unsafe-eval'.
//
// This package holds what the WebAssembly exports ([ParseJSON], [Check]),
// the extension's scripts and pages (ext/, embedded), and [Build], which
// writes the unpacked extension into a directory (`go run
// ./transports/browser/build DIR`). It does not talk to the relay itself:
// the extension does, over the relay's HTTP API (docs/web.md, "Browser
// extension") with a token minted by `crosstalk token new`.
package browser
