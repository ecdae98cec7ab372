// Package bench measures the relay's ingest on this machine: Ingest against
// its ceilings (a bare parse-and-verify handler, a single fsync-per-append
// writer), Scale on SQLite against NATS JetStream, one node and a 3-node
// cluster. The relays are started with server.Open, exactly as
// `crosstalk relay` starts them; the NATS servers are embedded
// (internal/natstest). docs/performance.md explains the goals and records
// the figures.
//
// It is the library of the crosstalk-bench command, not of the crosstalk
// binary, which must not carry nats-server. It checks no goals: it reports
// the figures and whether they meet docs/performance.md's goals.
package bench
