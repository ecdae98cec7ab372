package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// countingStore counts a Store's cursor reads; it does not
// pass CursorsOf on, as a wrapper that embeds ledger.Store alone.
type countingStore struct {
	ledger.Store
	gets, lists int
}

func (s *countingStore) GetCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	s.gets++
	return s.Store.GetCursor(ctx, group, actor)
}

// listingStore is countingStore passing CursorsOf on.
type listingStore struct{ *countingStore }

func (s listingStore) CursorsOf(ctx context.Context, actor string) (map[string]ledger.Cursor, error) {
	s.lists++
	return ledger.CursorsOf(ctx, s.Store, actor)
}

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
	hidden := &countingStore{Store: st}
	listing := listingStore{&countingStore{Store: st}}
	// A wrapper passing CursorsOf on to a store without it.
	overHidden := listingStore{&countingStore{Store: &countingStore{Store: st}}}
	tests := []struct {
		name             string
		st               ledger.Store
		c                *countingStore
		wantGets, wantLs int
	}{
		{"without CursorsOf", hidden, hidden, len(ask), 0},
		{"with CursorsOf", listing, listing.countingStore, 0, 1},
		{"passing on to one without", overHidden, overHidden.countingStore, len(ask), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ledger.CursorsIn(ctx, tt.st, "alice", ask)
			if err != nil || !maps.Equal(got, want) {
				t.Errorf("CursorsIn = %v, %v; want %v", got, err, want)
			}
			if tt.c.gets != tt.wantGets || tt.c.lists != tt.wantLs {
				t.Errorf("CursorsIn made %d GetCursor and %d CursorsOf calls, want %d and %d", tt.c.gets, tt.c.lists, tt.wantGets, tt.wantLs)
			}
		})
	}
	if _, err := ledger.CursorsOf(ctx, hidden, "alice"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CursorsOf(store without it) error = %v, want errors.ErrUnsupported", err)
	}
}
