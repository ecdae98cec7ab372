package relaytest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

func TestProbe(t *testing.T) {
	st, _ := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), nil)
	defer st.Close()
	r := gateway.New(st, nil)
	for _, text := range []string{
		"[[A→B v1]]\nintent: REQUEST\nbody: |\n  bad \xff\xfe bytes\n[[END]]\n",
		"[[A\xff→B v1]]\nintent: REQUEST\nbody: |\n  x\n[[END]]\n",
		"[[A→B v1]]\nintent: REQUEST\nbody: |\n  x\n\t[[END]]\n\t[[C→B v1]]\n[[END]]\n",
		"[[A→B v1]]\nintent: REQUEST\nbody: |\n  nul \x00 here\n[[END]]\n",
	} {
		outs, err := r.Ingest(context.Background(), gateway.Intake{Transport: "t", Data: strings.NewReader(text)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			d, _ := gateway.ParseData(o.Event)
			t.Logf("%q: reject=%v kind=%s text=%q raw=%q", text[:20], o.Reject, o.Event.Kind, d.Text, d.X.Raw)
		}
	}
}
