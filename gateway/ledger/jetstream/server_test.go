package jetstream_test

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// testNode is one embedded nats-server with JetStream, on loopback.
type testNode struct {
	srv *server.Server
	url string
}

// startNode starts one embedded server storing JetStream in dir. With
// cluster set, it joins the cluster whose route ports are routes.
func startNode(tb testing.TB, name, dir string, clusterPort int, routes []int, syncAlways bool) *testNode {
	tb.Helper()
	opts := &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
		SyncAlways: syncAlways,
		MaxPayload: 8 << 20,
	}
	if clusterPort != 0 {
		opts.Cluster = server.ClusterOpts{Name: "crosstalk-test", Host: "127.0.0.1", Port: clusterPort}
		for _, p := range routes {
			u := server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", p))
			opts.Routes = append(opts.Routes, u...)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		tb.Fatalf("server.NewServer(%s) error = %v", name, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatalf("server %s not ready", name)
	}
	n := &testNode{srv: srv, url: srv.ClientURL()}
	tb.Cleanup(n.stop)
	return n
}

func (n *testNode) stop() {
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// startSingle starts one server with sync_interval: always.
func startSingle(tb testing.TB) string {
	tb.Helper()
	return startNode(tb, "single", tb.TempDir(), 0, nil, true).url
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// startCluster starts a 3-node JetStream cluster and waits until it has
// a meta leader. It returns the nodes.
func startCluster(tb testing.TB) []*testNode {
	tb.Helper()
	ports := freePorts(tb, 3)
	var nodes []*testNode
	for i := range 3 {
		nodes = append(nodes, startNode(tb, fmt.Sprintf("n%d", i+1), tb.TempDir(), ports[i], ports, false))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		nc, err := nats.Connect(nodes[0].url)
		if err == nil {
			resp, err := nc.Request("$JS.API.INFO", nil, time.Second)
			nc.Close()
			if err == nil && !strings.Contains(string(resp.Data), `"error"`) {
				return nodes
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("cluster has no JetStream meta leader after 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clusterURL(nodes []*testNode) string {
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	return strings.Join(urls, ",")
}

var streamCounter atomic.Int64

// uniqueStream returns a new stream name.
func uniqueStream() string {
	return fmt.Sprintf("T%d", streamCounter.Add(1))
}
