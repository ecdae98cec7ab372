package api

import (
	"net/http"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// NormalizePathNames replaces r's {group} and {agent} path values with
// their NFC form (envelope.NormalizeIdentifier), so that a path written in
// NFD finds the group or agent recorded in NFC. It returns the
// *envelope.IdentifierError of the first one holding an invisible or
// reordering character (docs/format.md §12) — unless it is a group that
// store already holds under exactly that name, recorded before names were
// checked, which stays readable (and is shown escaped). The web inbox
// calls it too.
func NormalizePathNames(r *http.Request, store ledger.Store) error {
	for _, name := range [...]string{"group", "agent"} {
		v := r.PathValue(name)
		if v == "" {
			continue
		}
		n, err := envelope.NormalizeIdentifier(v)
		if err != nil {
			if name == "group" {
				if evs, rerr := store.Range(r.Context(), v, 0, nil, 1); rerr == nil && len(evs) > 0 {
					continue
				}
			}
			return err
		}
		r.SetPathValue(name, n)
	}
	return nil
}

// names wraps a handler of a path with {group} or {agent}: it normalises
// them, or answers 400 E-ADDRESS.
func (s *Server) names(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := NormalizePathNames(r, s.relay.Store()); err != nil {
			writeError(w, http.StatusBadRequest, string(envelope.CodeAddress), err.Error())
			return
		}
		h(w, r)
	}
}
