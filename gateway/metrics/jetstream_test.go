package metrics_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/metrics"
)

// startNATS starts an embedded nats-server with JetStream on loopback.
func startNATS(t *testing.T) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// gauge returns the value of the gathered gauge name.
func gauge(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.Metric) == 1 {
			return f.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}

// TestJetStreamLag: a follower that stops reading shows as the stream's
// lag, and the lag goes back to 0 when it catches up.
func TestJetStreamLag(t *testing.T) {
	st, err := jetstream.Open(t.Context(), startNATS(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := metrics.New(&metrics.Options{NoRuntime: true})
	m.WatchJetStream(st.Conn(), "")
	const events = 1000
	for b := 0; b < events; b += jetstream.MaxRecords {
		recs := make([]ledger.Record, jetstream.MaxRecords)
		for i := range recs {
			recs[i] = ledger.Record{Kind: "chat.message", GroupID: "g", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, b+i))}
		}
		if _, err := st.Append(t.Context(), recs); err != nil {
			t.Fatal(err)
		}
	}
	if n := gauge(t, m, "crosstalk_jetstream_stream_last_seq"); n < events {
		t.Errorf("stream_last_seq = %v, want ≥ %d", n, events)
	}
	if n := gauge(t, m, "crosstalk_jetstream_consumer_pending_max"); n != 0 {
		t.Errorf("consumer_pending_max = %v with no follower, want 0", n)
	}
	// A follower that reads one event and stalls.
	read, resume := make(chan int64), make(chan struct{})
	go func() {
		n := int64(0)
		for ev, err := range st.Follow(t.Context(), "g", 0) {
			if err != nil {
				return
			}
			if n++; n == 1 {
				read <- ev.Seq
				<-resume
			}
			if ev.Seq == events {
				read <- ev.Seq
				return
			}
		}
	}()
	<-read
	if n := gauge(t, m, "crosstalk_jetstream_consumers"); n != 1 {
		t.Errorf("consumers = %v, want 1", n)
	}
	// The ordered consumer fetches a page ahead; the rest is pending.
	if lag := gauge(t, m, "crosstalk_jetstream_consumer_pending_max"); lag < events/2 {
		t.Errorf("consumer_pending_max = %v with a follower stalled at seq 1 of %d, want ≥ %d", lag, events, events/2)
	}
	close(resume)
	<-read
	deadline := time.Now().Add(10 * time.Second)
	for gauge(t, m, "crosstalk_jetstream_consumer_pending_max") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("consumer_pending_max stays above 0 after the follower caught up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
