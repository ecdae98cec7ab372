package gateway

import "time"

// Observer is told what the relay does, for metrics (package
// gateway/metrics implements it; docs/operations.md lists what it
// exports). Its methods are called on the relay's hot paths: they must be
// quick, safe for concurrent use, and must not keep or change what they
// are given.
type Observer interface {
	// Ingested is called once per intake when Ingest returns: the
	// transport it came over, its outcomes (nil when err is set: nothing
	// was recorded) and how long Ingest took, from reading the intake to
	// the durable append.
	Ingested(transport string, outs []Outcome, err error, took time.Duration)
	// Delivery is called by the outbound dispatcher (RunOutbound) when a
	// delivery over transport is queued (result "queued"), is to be tried
	// again ("retry"), or is finished ("delivered", "failed"); backlog is
	// how many deliveries are pending — queued or in flight — after it.
	Delivery(transport, result string, backlog int)
}

// Results of Observer.Delivery.
const (
	DeliveryQueued    = "queued"
	DeliveryRetry     = "retry"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// observeIngest reports one intake to the observer; Ingest defers it.
func (r *Relay) observeIngest(transport string, start time.Time, outs *[]Outcome, err *error) {
	if r.obs != nil {
		r.obs.Ingested(transport, *outs, *err, time.Since(start))
	}
}

// observe reports a delivery's state change to the relay's observer with
// the dispatcher's backlog. o.mu must not be held.
func (o *outbound) observe(d *delivery, result string) {
	if o.r.obs == nil {
		return
	}
	o.mu.Lock()
	n := len(o.pending)
	o.mu.Unlock()
	o.r.obs.Delivery(d.transport, result, n)
}
