// Package natstest starts embedded nats-servers with JetStream on loopback,
// alone or as a cluster, in the calling process: the one helper the
// JetStream ledger's tests, the reliability tests and `crosstalk-bench
// scale` share (docs/scaling.md shows the production configuration these
// mirror).
//
// It is for tests and benchmarks only: it imports nats-server, which the
// crosstalk binary does not.
package natstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Node is one embedded nats-server with JetStream.
type Node struct {
	// Server is the running server.
	Server *server.Server
	// URL is its client URL, nats://127.0.0.1:PORT.
	URL string
}

// Stop shuts the server down and waits for it; stopping twice is harmless.
func (n *Node) Stop() {
	n.Server.Shutdown()
	n.Server.WaitForShutdown()
}

// Options configure a node.
type Options struct {
	// Name is the server name; "n1" when empty.
	Name string
	// Dir is where JetStream stores its data (required).
	Dir string
	// ClusterPort, when not zero, is the node's cluster port, and Routes
	// the cluster ports of every member (itself included).
	ClusterPort int
	Routes      []int
	// SyncAlways makes JetStream fsync every write (sync_interval:
	// always, as docs/scaling.md's production configuration).
	SyncAlways bool
}

// StartNode starts one server and waits until it accepts connections.
func StartNode(o Options) (*Node, error) {
	if o.Name == "" {
		o.Name = "n1"
	}
	opts := &server.Options{
		ServerName: o.Name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   o.Dir,
		NoLog:      true,
		NoSigs:     true,
		SyncAlways: o.SyncAlways,
		MaxPayload: 8 << 20, // as docs/scaling.md's configuration
	}
	if o.ClusterPort != 0 {
		opts.Cluster = server.ClusterOpts{Name: "crosstalk-test", Host: "127.0.0.1", Port: o.ClusterPort}
		for _, p := range o.Routes {
			opts.Routes = append(opts.Routes, server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", p))...)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats-server %s: %w", o.Name, err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats-server %s: not ready within 10 s", o.Name)
	}
	return &Node{Server: s, URL: s.ClientURL()}, nil
}

// FreePorts returns n loopback ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var (
		ports []int
		ls    []net.Listener
	)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Start starts n nodes storing under dir (dir/n1, dir/n2, …), clustered
// when n > 1, and waits until JetStream answers (a cluster has a meta
// leader). On error no node is left running.
func Start(dir string, n int, syncAlways bool) ([]*Node, error) {
	var ports []int
	if n > 1 {
		var err error
		if ports, err = FreePorts(n); err != nil {
			return nil, err
		}
	}
	var nodes []*Node
	for i := range n {
		o := Options{Name: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), SyncAlways: syncAlways}
		if n > 1 {
			o.ClusterPort, o.Routes = ports[i], ports
		}
		node, err := StartNode(o)
		if err != nil {
			StopAll(nodes)
			return nil, err
		}
		nodes = append(nodes, node)
	}
	if err := WaitJetStream(nodes[0].URL, 20*time.Second); err != nil {
		StopAll(nodes)
		return nil, err
	}
	return nodes, nil
}

// StopAll stops the nodes.
func StopAll(nodes []*Node) {
	for _, n := range nodes {
		n.Stop()
	}
}

// WaitJetStream waits until the JetStream API at url answers without
// error, for at most timeout.
func WaitJetStream(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		nc, err := nats.Connect(url)
		if err == nil {
			msg, rerr := nc.Request("$JS.API.INFO", nil, time.Second)
			nc.Close()
			if rerr == nil && !strings.Contains(string(msg.Data), `"error"`) {
				return nil
			}
			err = rerr
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("nats: JetStream at %s not ready after %s", url, timeout), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URLs is the nodes' client URLs joined by commas, as a ledger spec.
func URLs(nodes []*Node) string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL
	}
	return strings.Join(urls, ",")
}

// StreamLeader returns the index in nodes of the node that leads stream,
// after checking that every node holds a replica.
func StreamLeader(nodes []*Node, stream string) (int, error) {
	nc, err := nats.Connect(URLs(nodes))
	if err != nil {
		return -1, err
	}
	defer nc.Close()
	msg, err := nc.Request("$JS.API.STREAM.INFO."+stream, nil, 5*time.Second)
	if err != nil {
		return -1, fmt.Errorf("stream info of %s: %w", stream, err)
	}
	var info struct {
		Cluster struct {
			Leader   string
			Replicas []struct{ Name string }
		}
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		return -1, fmt.Errorf("stream info of %s: %w (%s)", stream, err, msg.Data)
	}
	if len(info.Cluster.Replicas)+1 != len(nodes) {
		return -1, fmt.Errorf("stream %s has %d replicas besides its leader, want %d: %s", stream, len(info.Cluster.Replicas), len(nodes)-1, msg.Data)
	}
	for i, n := range nodes {
		if n.Server.Name() == info.Cluster.Leader {
			return i, nil
		}
	}
	return -1, fmt.Errorf("stream %s leader %q is none of the nodes", stream, info.Cluster.Leader)
}

// Cluster starts a 3-node cluster for a test in temporary directories,
// stopped when the test ends.
func Cluster(tb testing.TB, syncAlways bool) []*Node {
	tb.Helper()
	nodes, err := Start(tb.TempDir(), 3, syncAlways)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { StopAll(nodes) })
	return nodes
}

// Single starts one node for a test, stopped when the test ends.
func Single(tb testing.TB, syncAlways bool) *Node {
	tb.Helper()
	n, err := StartNode(Options{Name: "single", Dir: tb.TempDir(), SyncAlways: syncAlways})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(n.Stop)
	return n
}
