package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// WatchSQLite adds the group-commit counters of a SQLite ledger
// (docs/operations.md), read from st.Stats at each scrape: write
// transactions committed, the write calls they carried (their ratio is
// the group-commit batch), and the fsyncs of the write-ahead log with the
// time they took (their ratio is the disk's mean time to make a commit
// durable, the floor of every append's latency).
func (m *Metrics) WatchSQLite(st *sqlite.Store) {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_sqlite_"+name, help, nil, nil)
	}
	m.register(&sqliteCollector{
		st:       st,
		commits:  desc("commits_total", "Write transactions the SQLite ledger committed."),
		ops:      desc("write_ops_total", "Write calls (appends, imports, cursors, claims) those transactions carried."),
		syncs:    desc("fsyncs_total", "Fsyncs of the SQLite ledger's write-ahead log."),
		syncSecs: desc("fsync_seconds_total", "Time those fsyncs took, summed."),
	})
}

// sqliteCollector reads a SQLite ledger's counters at each scrape.
type sqliteCollector struct {
	st                            *sqlite.Store
	commits, ops, syncs, syncSecs *prometheus.Desc
}

func (c *sqliteCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.commits
	ch <- c.ops
	ch <- c.syncs
	ch <- c.syncSecs
}

func (c *sqliteCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.Stats()
	ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(c.ops, prometheus.CounterValue, float64(s.Ops))
	ch <- prometheus.MustNewConstMetric(c.syncs, prometheus.CounterValue, float64(s.Syncs))
	ch <- prometheus.MustNewConstMetric(c.syncSecs, prometheus.CounterValue, s.SyncTime.Seconds())
}
