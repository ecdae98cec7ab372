package ledgertest

import (
	"context"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// CursorCounter counts the cursor reads made through it of the Store it
// wraps: GetCursor calls in Gets, and, through ListingCursors, CursorsOf
// calls in Lists. Alone it does not pass CursorsOf on, as a wrapper that
// embeds ledger.Store alone would not: tests use it to check that a
// capability is not lost behind a wrapper.
type CursorCounter struct {
	ledger.Store
	Gets, Lists int
}

// GetCursor implements ledger.Store, counting the call.
func (s *CursorCounter) GetCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	s.Gets++
	return s.Store.GetCursor(ctx, group, actor)
}

// ListingCursors is a CursorCounter that passes CursorsOf on
// (ledger.CursorLister), counting the calls.
type ListingCursors struct{ *CursorCounter }

// CursorsOf implements ledger.CursorLister with ledger.CursorsOf of the
// wrapped Store.
func (s ListingCursors) CursorsOf(ctx context.Context, actor string) (map[string]ledger.Cursor, error) {
	s.Lists++
	return ledger.CursorsOf(ctx, s.Store, actor)
}
