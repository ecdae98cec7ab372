package gateway

import "github.com/crosstalk-go/crosstalk/gateway/ledger"

// SyncProjectionsOnEveryAppend makes every append of r apply its facts to
// the projections at once (no projEvery between two syncs), so that tests
// see the write path do all of the projections' work.
func SyncProjectionsOnEveryAppend(r *Relay) { r.projEvery = 0 }

// ProjectionLogReads returns how many times r's projections read the
// ledger's log to catch up.
func ProjectionLogReads(r *Relay) int64 { return r.projLogs.Load() }

// OutboundTracked returns how many deliveries the running dispatcher of r
// remembers as final and as pending; zeros before RunOutbound.
func OutboundTracked(r *Relay) (final, pending int) {
	o := r.outbound.Load()
	if o == nil {
		return 0, 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.final), len(o.pending)
}

// OutboundQueued returns how many deliveries wait in the running
// dispatcher's queue for their time; zero before RunOutbound.
func OutboundQueued(r *Relay) int {
	o := r.outbound.Load()
	if o == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.queue)
}

// OutboundHorizon returns the dispatch horizon of the running dispatcher
// of r as it stands, and as it was last saved; zeros before RunOutbound.
func OutboundHorizon(r *Relay) (now, saved ledger.Mark) {
	o := r.outbound.Load()
	if o == nil {
		return ledger.Mark{}, ledger.Mark{}
	}
	now = o.horizon()
	o.mu.Lock()
	defer o.mu.Unlock()
	return now, o.saved
}

// OutboundHorizonName returns the name of the ledger mark holding the
// dispatch horizon of r's address book.
func OutboundHorizonName(r *Relay) string { return r.horizonName() }

// ResumeSaveEvery is resumeSaveEvery, for the resume tests' bounds.
const ResumeSaveEvery = resumeSaveEvery

// ResumeMarkName is resumeMarkName.
func ResumeMarkName(agent string) string { return resumeMarkName(agent) }

// DeliveredActor is the cursor key of actor's delivery cursor.
func DeliveredActor(actor string) string { return deliveredActor(actor) }
