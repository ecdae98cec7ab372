package memory_test

import (
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/ledgertest"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Store {
		s := memory.New(nil)
		t.Cleanup(func() { s.Close() })
		return s
	})
}
