package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
)

// WatchJetStream adds the metrics of a JetStream ledger (docs/scaling.md),
// read from the server at each scrape over nc: the stream's last sequence
// and message count, and its consumers — the followers of every relay on
// the stream (group and agent streams, outbound dispatchers) — with how
// many messages each has still to receive. The largest of those,
// crosstalk_jetstream_consumer_pending_max, is the stream's lag: how far
// the slowest follower is behind the newest event. stream "" means
// jetstream.DefaultStream.
func (m *Metrics) WatchJetStream(nc *nats.Conn, stream string) {
	if stream == "" {
		stream = jetstream.DefaultStream
	}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_jetstream_"+name, help, nil, prometheus.Labels{"stream": stream})
	}
	m.register(&jsCollector{
		nc: nc, stream: stream, log: m.log,
		lastSeq:  desc("stream_last_seq", "The stream's last sequence number (server view)."),
		messages: desc("stream_messages", "Messages stored in the stream."),
		count:    desc("consumers", "Consumers on the stream: followers of every relay sharing it."),
		maxPend:  desc("consumer_pending_max", "Messages the slowest consumer has still to receive: the stream's lag."),
		sumPend:  desc("consumer_pending", "Messages all consumers have still to receive, summed."),
	})
}

// jsCollector reads the stream and consumer state at each scrape.
type jsCollector struct {
	nc                                         *nats.Conn
	stream                                     string
	log                                        *slog.Logger
	lastSeq, messages, count, maxPend, sumPend *prometheus.Desc
}

func (c *jsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lastSeq
	ch <- c.messages
	ch <- c.count
	ch <- c.maxPend
	ch <- c.sumPend
}

func (c *jsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.collect(ctx, ch); err != nil {
		c.log.Warn("metrics: reading the JetStream ledger's state", "stream", c.stream, "err", err)
		ch <- prometheus.NewInvalidMetric(c.lastSeq, err)
	}
}

func (c *jsCollector) collect(ctx context.Context, ch chan<- prometheus.Metric) error {
	js, err := natsjs.New(c.nc)
	if err != nil {
		return err
	}
	s, err := js.Stream(ctx, c.stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", c.stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", c.stream, err)
	}
	var n, sum, most uint64
	consumers := s.ListConsumers(ctx)
	for ci := range consumers.Info() {
		n++
		sum += ci.NumPending
		most = max(most, ci.NumPending)
	}
	if err := consumers.Err(); err != nil {
		return fmt.Errorf("stream %s: consumers: %w", c.stream, err)
	}
	gauge := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(c.lastSeq, info.State.LastSeq)
	gauge(c.messages, info.State.Msgs)
	gauge(c.count, n)
	gauge(c.maxPend, most)
	gauge(c.sumPend, sum)
	return nil
}
