package jetstream_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/crosstalk-go/crosstalk/internal/natstest"
)

// testNode is one embedded nats-server with JetStream, on loopback.
type testNode = natstest.Node

// startSingle starts one server with sync_interval: always.
func startSingle(tb testing.TB) string {
	tb.Helper()
	return natstest.Single(tb, true).URL
}

// startCluster starts a 3-node JetStream cluster and waits until it has
// a meta leader. It returns the nodes.
func startCluster(tb testing.TB) []*testNode {
	tb.Helper()
	return natstest.Cluster(tb, false)
}

var streamCounter atomic.Int64

// uniqueStream returns a new stream name.
func uniqueStream() string {
	return fmt.Sprintf("T%d", streamCounter.Add(1))
}
