package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/ledgertest"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

func openTemp(t *testing.T) ledger.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	ledgertest.Run(t, openTemp)
	ledgertest.RunReopen(t, func(t *testing.T) func() ledger.Store {
		path := filepath.Join(t.TempDir(), "ledger.db")
		return func() ledger.Store {
			s, err := sqlite.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatalf("Open(%s) error = %v", path, err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}
