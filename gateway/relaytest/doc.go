// Package relaytest holds the relay's reliability tests (docs/design.md §5.1,
// §5.3, §5.6; issue 4 item 6). It has no API of its own: everything is in
// its test files.
//
//   - crash: a child `crosstalk relay` process under concurrent HTTP load is
//     killed with SIGKILL several times and restarted on the same data dir;
//     every envelope that got a 200 must be in the ledger exactly once, and
//     seq must stay dense in every group.
//   - retries: an envelope sent several times, one after the other and at
//     once, in different dresses (CRLF, fenced, quoted, v1.0 without a
//     message id), is one event.
//   - hostile input: the corpus of fixtures/hostile, plus inputs too large
//     to keep as files, rate limiting and signature failures, against an
//     in-process relay; each is refused with the right status and code,
//     recorded where docs/design.md says so, and the relay keeps serving.
//   - end to end (issue 5): one signed envelope goes clipboard → relay →
//     mail (real Dovecot and Postfix) → relay → folder → HTTP → relay, once,
//     byte for byte; and a relay killed mid-delivery delivers every pending
//     envelope exactly once after restarts.
//   - multi-relay (issue 7): three child relays on one 3-node NATS JetStream
//     cluster; one relay and one NATS node are stopped mid-load; nothing is
//     lost or doubled, seq stays dense, SSE followers on every relay see
//     every event, and claims stay exclusive across relays.
//
// The tests use loopback only, temporary directories, and bounded loops.
package relaytest
