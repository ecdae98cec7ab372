package ledger_test

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/ledgertest"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestCursorsIn checks that CursorsIn reads with one CursorsOf call when
// the store has it, falls back to GetCursor per group when it has not or
// when a wrapper's inner store has not (errors.ErrUnsupported), and gives
// the same cursors either way.
func TestCursorsIn(t *testing.T) {
	ctx := t.Context()
	st := memory.New(nil)
	defer st.Close()
	var groups []string
	for i := range 10 {
		g := fmt.Sprintf("g%d", i)
		groups = append(groups, g)
		res, err := st.Append(ctx, []ledger.Record{{Kind: "chat.message", GroupID: g, By: "user", Data: []byte(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		if i%3 != 0 {
			if _, err := st.SetCursor(ctx, g, "alice", res[0].Event.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	ask := groups[:7]
	want := map[string]ledger.Cursor{}
	for _, g := range ask {
		if c, err := st.GetCursor(ctx, g, "alice"); err == nil {
			want[g] = c
		}
	}
	hidden := &ledgertest.CursorCounter{Store: st}
	listing := ledgertest.ListingCursors{CursorCounter: &ledgertest.CursorCounter{Store: st}}
	// A wrapper passing CursorsOf on to a store without it.
	overHidden := ledgertest.ListingCursors{CursorCounter: &ledgertest.CursorCounter{Store: &ledgertest.CursorCounter{Store: st}}}
	tests := []struct {
		name             string
		st               ledger.Store
		c                *ledgertest.CursorCounter
		wantGets, wantLs int
	}{
		{"without CursorsOf", hidden, hidden, len(ask), 0},
		{"with CursorsOf", listing, listing.CursorCounter, 0, 1},
		{"passing on to one without", overHidden, overHidden.CursorCounter, len(ask), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ledger.CursorsIn(ctx, tt.st, "alice", ask)
			if err != nil || !maps.Equal(got, want) {
				t.Errorf("CursorsIn = %v, %v; want %v", got, err, want)
			}
			if tt.c.Gets != tt.wantGets || tt.c.Lists != tt.wantLs {
				t.Errorf("CursorsIn made %d GetCursor and %d CursorsOf calls, want %d and %d", tt.c.Gets, tt.c.Lists, tt.wantGets, tt.wantLs)
			}
		})
	}
	if _, err := ledger.CursorsOf(ctx, hidden, "alice"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CursorsOf(store without it) error = %v, want errors.ErrUnsupported", err)
	}
}
