// Package server assembles a whole crosstalk relay from Options: the ledger
// backend (SQLite or NATS JetStream), the signature verifier over a trust
// store, the address book, the transports (folder, clipboard, mail, HTTP
// out), the HTTP API with the agent endpoints, the web inbox and the
// outbound dispatcher (docs/design.md §5; docs/configuration.md lists the
// configuration each option comes from).
//
// It is the one place a relay is wired together: `crosstalk relay`, the
// bench commands and the tests all call Open. It does not read
// configuration files or flags, install signal handlers or choose exit
// codes: cmd/crosstalk turns its TOML and flags into Options.
package server
