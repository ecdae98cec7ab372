package gateway

// SyncProjectionsOnEveryAppend makes every append of r apply its facts to
// the projections at once (no projEvery between two syncs), so that tests
// see the write path do all of the projections' work.
func SyncProjectionsOnEveryAppend(r *Relay) { r.projEvery = 0 }

// ProjectionLogReads returns how many times r's projections read the
// ledger's log to catch up.
func ProjectionLogReads(r *Relay) int64 { return r.projLogs.Load() }
