package relaytest

import (
	"testing"

	"github.com/crosstalk-go/crosstalk/internal/natstest"
)

// startNATSCluster starts a 3-node JetStream cluster on loopback and waits
// until it has a JetStream meta leader.
func startNATSCluster(t *testing.T) []*natstest.Node {
	t.Helper()
	return natstest.Cluster(t, false)
}

// streamLeader returns the index in nodes of the node that leads stream.
func streamLeader(t *testing.T, nodes []*natstest.Node, stream string) int {
	t.Helper()
	i, err := natstest.StreamLeader(nodes, stream)
	if err != nil {
		t.Fatal(err)
	}
	return i
}
