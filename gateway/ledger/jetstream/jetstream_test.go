package jetstream_test

import (
	"github.com/crosstalk-go/crosstalk/internal/natstest"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/ledgertest"
)

// opener returns a function that opens a Store on a new stream at url.
func opener(url string, replicas int) func(t *testing.T) ledger.Store {
	return func(t *testing.T) ledger.Store {
		t.Helper()
		s, err := jetstream.Open(t.Context(), url, &jetstream.Options{Stream: uniqueStream(), Replicas: replicas})
		if err != nil {
			t.Fatalf("Open(%s) error = %v", url, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// reopener is RunReopen's storage function: one stream, opened again.
func reopener(url string, replicas int) func(t *testing.T) func() ledger.Store {
	return func(t *testing.T) func() ledger.Store {
		name := uniqueStream()
		return func() ledger.Store {
			s, err := jetstream.Open(t.Context(), url, &jetstream.Options{Stream: name, Replicas: replicas})
			if err != nil {
				t.Fatalf("Open(%s, %s) error = %v", url, name, err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}
}

func TestConformanceSingleNode(t *testing.T) {
	url := startSingle(t)
	ledgertest.Run(t, opener(url, 1))
	ledgertest.RunReopen(t, reopener(url, 1))
}

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster in -short mode")
	}
	nodes := startCluster(t)
	url := natstest.URLs(nodes)
	ledgertest.Run(t, opener(url, 3))
	ledgertest.RunReopen(t, reopener(url, 3))
}
