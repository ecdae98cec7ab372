package metrics

import (
	"context"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// Store returns st with its appends measured: their latency
// (crosstalk_ledger_append_duration_seconds), failures and the events they
// added. Every other method is st's own. Hand the result to gateway.New;
// keep st itself for what needs its concrete type (statistics, Close).
func (m *Metrics) Store(st ledger.Store) ledger.Store {
	return &store{Store: st, m: m}
}

// store is a ledger.Store whose Append is measured.
type store struct {
	ledger.Store
	m *Metrics
}

// Append implements ledger.Store.
func (s *store) Append(ctx context.Context, recs []ledger.Record) ([]ledger.Result, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, recs)
	s.m.appendLatency.Observe(time.Since(start).Seconds())
	if err != nil {
		s.m.appendErrors.Inc()
		return res, err
	}
	n := 0
	for _, r := range res {
		if !r.Duplicate {
			n++
		}
	}
	s.m.appended.Add(float64(n))
	return res, nil
}

// CursorsOf implements ledger.CursorLister: st's own, or an error
// wrapping errors.ErrUnsupported when st has none (ledger.CursorsIn then
// reads cursor by cursor).
func (s *store) CursorsOf(ctx context.Context, actor string) (map[string]ledger.Cursor, error) {
	return ledger.CursorsOf(ctx, s.Store, actor)
}

// Unwrap returns the measured store.
func (s *store) Unwrap() ledger.Store { return s.Store }
