// Package envelope finds, parses, validates, formats and composes AI
// Crosstalk envelopes (protocol v1.1; see docs/format.md and the spec in
// shared/seeds/ai-crosstalk-protocol-v1.1.md).
package envelope
