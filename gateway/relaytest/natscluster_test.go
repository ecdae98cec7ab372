package relaytest

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// natsNode is one embedded nats-server with JetStream, on loopback, in the
// test process (adapted from gateway/ledger/jetstream's server_test.go).
type natsNode struct {
	srv *server.Server
	url string
}

// startNATSNode starts one embedded server storing JetStream in dir, as
// member of the cluster whose route ports are routes.
func startNATSNode(t *testing.T, name, dir string, clusterPort int, routes []int) *natsNode {
	t.Helper()
	opts := &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
		MaxPayload: 8 << 20, // as docs/scaling.md's cluster config
		Cluster:    server.ClusterOpts{Name: "crosstalk-relaytest", Host: "127.0.0.1", Port: clusterPort},
	}
	for _, p := range routes {
		opts.Routes = append(opts.Routes, server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", p))...)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("server.NewServer(%s) = %v", name, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatalf("nats-server %s not ready within 10 s", name)
	}
	n := &natsNode{srv: srv, url: srv.ClientURL()}
	t.Cleanup(n.stop)
	return n
}

// stop shuts the server down and waits for it; stopping twice is harmless.
func (n *natsNode) stop() {
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// startNATSCluster starts a 3-node JetStream cluster on loopback and waits
// until it has a JetStream meta leader.
func startNATSCluster(t *testing.T) []*natsNode {
	t.Helper()
	var (
		ports []int
		ls    []net.Listener
	)
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	var nodes []*natsNode
	for i := range 3 {
		nodes = append(nodes, startNATSNode(t, fmt.Sprintf("n%d", i+1), t.TempDir(), ports[i], ports))
	}
	for try := 0; ; try++ {
		if try == 400 {
			t.Fatalf("the NATS cluster has no JetStream meta leader after 400 tries")
		}
		nc, err := nats.Connect(nodes[0].url)
		if err == nil {
			resp, err := nc.Request("$JS.API.INFO", nil, time.Second)
			nc.Close()
			if err == nil && !strings.Contains(string(resp.Data), `"error"`) {
				return nodes
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// streamLeader returns the index in nodes of the node that leads stream.
func streamLeader(t *testing.T, nodes []*natsNode, stream string) int {
	t.Helper()
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatalf("nats.Connect() = %v", err)
	}
	defer nc.Close()
	msg, err := nc.Request("$JS.API.STREAM.INFO."+stream, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("stream info of %s: %v", stream, err)
	}
	var info struct {
		Cluster struct {
			Leader   string
			Replicas []struct{ Name string }
		}
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatalf("stream info of %s: %v (%s)", stream, err, msg.Data)
	}
	if len(info.Cluster.Replicas)+1 != len(nodes) {
		t.Fatalf("stream %s has %d replicas besides its leader, want %d (R%d): %s", stream, len(info.Cluster.Replicas), len(nodes)-1, len(nodes), msg.Data)
	}
	for i, n := range nodes {
		if n.srv.Name() == info.Cluster.Leader {
			return i
		}
	}
	t.Fatalf("stream %s leader %q is none of the nodes", stream, info.Cluster.Leader)
	return -1
}
