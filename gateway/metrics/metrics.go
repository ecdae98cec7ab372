// Package metrics exports what a relay does as Prometheus metrics
// (docs/operations.md lists every one): envelopes received by transport
// and outcome, rejections by error code, verification statuses, ingest and
// ledger append latency, outbound deliveries and their backlog, open
// must_respond obligations per agent (C2A "Response Policy", docs/design.md §5.4),
// open SSE and WebSocket streams, on a SQLite ledger its group commits and
// fsyncs, and on a JetStream ledger how far the stream's followers lag.
//
// Each Metrics has its own registry, so several relays in one process
// (tests, benchmarks) never share counters. The relay, its ledger, its
// dispatcher and its HTTP server report through hooks: Metrics is a
// gateway.Observer, Store wraps the ledger, Middleware wraps the HTTP
// handler. Handler serves the text exposition format; mount it behind the
// API's gate (api.Server.Handle) so that /metrics has the API's auth rules.
//
// Label values are bounded: transports, outcomes, codes and statuses come
// from the relay's own vocabularies, and the agent label of
// crosstalk_must_respond_open names only address-book agents — everyone
// else is summed under agent="other". No message or event id is ever a
// label value.
//
// What it does not do: it does not listen, push, or keep history; the
// counters start at zero with each process.
package metrics

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
)

// Namespace prefixes every crosstalk metric name.
const Namespace = "crosstalk"

// Outcomes of an envelope in crosstalk_envelopes_received_total.
const (
	OutcomeAccepted  = "accepted"
	OutcomeDuplicate = "duplicate"
	OutcomeRejected  = "rejected"
)

// latencyBuckets span 0.5 ms to about 16 s: a group commit takes a few
// milliseconds, a stalled disk or JetStream quorum seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// Metrics holds one relay's metrics and their registry. Create it with
// New; its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	log *slog.Logger
	// own are the crosstalk collectors registered, for docs_test.go.
	own []prometheus.Collector

	received      *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	ingestErrors  *prometheus.CounterVec
	verifications *prometheus.CounterVec
	ingestLatency *prometheus.HistogramVec

	appendLatency prometheus.Histogram
	appendErrors  prometheus.Counter
	appended      prometheus.Counter

	deliveries *prometheus.CounterVec
	retries    *prometheus.CounterVec
	backlog    prometheus.Gauge

	responses    *prometheus.CounterVec
	streamsOpen  *prometheus.GaugeVec
	streamsTotal *prometheus.CounterVec
}

// Options configure New. Nil means defaults.
type Options struct {
	// Logger receives errors met while collecting (a ledger that cannot
	// be read); nil discards them.
	Logger *slog.Logger
	// NoRuntime leaves out the Go runtime and process collectors (go_*,
	// process_*).
	NoRuntime bool
}

// New returns a Metrics with a fresh registry holding every crosstalk
// metric and, unless opts.NoRuntime, the Go and process collectors.
func New(opts *Options) *Metrics {
	if opts == nil {
		opts = &Options{}
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: opts.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		m.register(c)
		return c
	}
	m.received = counter("envelopes_received_total",
		"Envelopes (and unparsable inputs) received, by transport and outcome: accepted, duplicate or rejected.", "transport", "outcome")
	m.rejected = counter("envelopes_rejected_total",
		"Envelopes and inputs rejected, by error code (E-FORMAT, E-PERM, …).", "code")
	m.ingestErrors = counter("ingest_errors_total",
		"Intakes that could not be read or recorded at all (nothing was acknowledged; the sender retries), by transport.", "transport")
	m.verifications = counter("verifications_total",
		"Signature checks of received envelopes, by status (verified, first-use, unsigned, unknown-key, key-changed, bad-signature, revoked).", "status")
	m.ingestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "ingest_duration_seconds",
		Help: "Time from reading an intake to its durable append, by transport.", Buckets: latencyBuckets}, []string{"transport"})
	m.appendLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "ledger_append_duration_seconds",
		Help: "Time of one ledger append (a batch of records) until it is durable.", Buckets: latencyBuckets})
	m.appendErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "ledger_append_errors_total",
		Help: "Ledger appends that failed."})
	m.appended = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "ledger_events_appended_total",
		Help: "Events appended to the ledger (duplicates not counted)."})
	m.deliveries = counter("outbound_deliveries_total",
		"Outbound deliveries finished, by transport and result: delivered or failed (for good).", "transport", "result")
	m.retries = counter("outbound_retries_total",
		"Outbound delivery attempts that failed and will be tried again, by transport.", "transport")
	m.backlog = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "outbound_backlog",
		Help: "Outbound deliveries pending: queued, waiting to retry, or in flight."})
	m.streamsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "streams_open",
		Help: "Open long-lived connections, by kind: sse (event streams of the API and the web inbox) or websocket (agent channels)."}, []string{"kind"})
	m.responses = counter("http_responses_total",
		"HTTP responses by status code, including the gate's refusals (401, 403, 429) that no envelope counter sees.", "status")
	m.streamsTotal = counter("streams_total", "Long-lived connections opened, by kind: sse or websocket.", "kind")
	for _, kind := range []string{StreamSSE, StreamWebSocket} {
		m.streamsOpen.WithLabelValues(kind)
		m.streamsTotal.WithLabelValues(kind)
	}
	m.register(m.ingestLatency, m.appendLatency, m.appendErrors, m.appended, m.backlog, m.streamsOpen)
	if !opts.NoRuntime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// register registers crosstalk collectors.
func (m *Metrics) register(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
	m.own = append(m.own, cs...)
}

// Registry returns the registry, to register more collectors or to gather.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format. It
// does not authenticate: mount it behind the API's gate.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.reg,
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	})
}

var _ gateway.Observer = (*Metrics)(nil)

// Ingested implements gateway.Observer: it counts the intake's envelopes
// by outcome, its rejections by code, the verification statuses, and
// observes the ingest latency.
func (m *Metrics) Ingested(transport string, outs []gateway.Outcome, err error, took time.Duration) {
	switch {
	case errors.Is(err, gateway.ErrTooManyEnvelopes): // refused whole, as E-TOO-LARGE
		m.received.WithLabelValues(transport, OutcomeRejected).Inc()
		m.rejected.WithLabelValues(string(envelope.CodeTooLarge)).Inc()
		return
	case err != nil:
		m.ingestErrors.WithLabelValues(transport).Inc()
		return
	}
	m.ingestLatency.WithLabelValues(transport).Observe(took.Seconds())
	for _, o := range outs {
		outcome := OutcomeAccepted
		switch {
		case o.Reject != nil:
			outcome = OutcomeRejected
			m.rejected.WithLabelValues(string(o.Reject.Code)).Inc()
		case o.Duplicate:
			outcome = OutcomeDuplicate
		}
		m.received.WithLabelValues(transport, outcome).Inc()
		if o.Verification.Status != "" {
			m.verifications.WithLabelValues(o.Verification.Status).Inc()
		}
	}
}

// Delivery implements gateway.Observer: it counts finished deliveries and
// retries and sets the backlog.
func (m *Metrics) Delivery(transport, result string, backlog int) {
	switch result {
	case gateway.DeliveryDelivered, gateway.DeliveryFailed:
		m.deliveries.WithLabelValues(transport, result).Inc()
	case gateway.DeliveryRetry:
		m.retries.WithLabelValues(transport).Inc()
	}
	m.backlog.Set(float64(backlog))
}
