package web

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/client"
)

// handoffsData is the "Passed to" / "Needs input" page: open HANDOFFs and
// BLOCKEDs (BeadBoard §6.3), pageItems at a time.
type handoffsData struct {
	Open []gateway.Waiting
	pageLinks
}

// handoffs lists every open HANDOFF and BLOCKED (Relay.OpenProtocol),
// oldest first by event id (ULIDs sort by time), pageItems at a time:
// ?after=EVENT-ID (docs/web.md "Pagination"). Paging by id, not by
// position in the list, keeps a page right when the item it starts after
// was settled meanwhile, and an unknown id past the end gives an empty
// page rather than the first one again.
func (s *Server) handoffs(w http.ResponseWriter, r *http.Request, c *call) {
	all, err := s.relay.OpenProtocol(r.Context())
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	slices.SortFunc(all, func(a, b gateway.Waiting) int { return strings.Compare(a.EventID, b.EventID) })
	start := 0
	if after := r.URL.Query().Get("after"); after != "" {
		start = sort.Search(len(all), func(i int) bool { return all[i].EventID > after })
	}
	var data handoffsData
	if start > 0 {
		data.Newer = "/ui/handoffs"
		if start > pageItems {
			data.Newer += "?" + url.Values{"after": {all[start-pageItems-1].EventID}}.Encode()
		}
	}
	end := min(len(all), start+pageItems)
	data.Open = all[start:end]
	if end < len(all) {
		data.Older = "/ui/handoffs?" + url.Values{"after": {all[end-1].EventID}}.Encode()
	}
	s.render(w, r, c, http.StatusOK, "handoffs", "Handoffs and blockers", data)
}

// event jumps to an event by id: the thread (or group) page at its
// anchor. A forwarded message links its source this way; a source this
// relay does not hold is shown as unavailable (CCCS §9.1), not a blank.
func (s *Server) event(w http.ResponseWriter, r *http.Request, c *call) {
	id := client.FromSegment(r.PathValue("id")) // as the links write it (client.PathSegment)
	ev, err := s.relay.Store().Get(r.Context(), id)
	if err != nil {
		s.fail(w, r, c, http.StatusNotFound, gateway.CodeNotFound, "source unavailable: event "+id+" is not in this relay's ledger (another relay's, or removed by retention)")
		return
	}
	thread := ""
	if d, err := gateway.ParseData(ev); err == nil && d.X != nil && d.X.Envelope != nil {
		thread = d.X.Envelope.Thread
	}
	http.Redirect(w, r, threadLink(ev.GroupID, thread, ev.Seq), http.StatusSeeOther)
}

// protocolRows are the payload fields of a HANDOFF or BLOCKED as the
// pages list them.
func protocolRows(p *gateway.Protocol) [][2]string {
	if p == nil {
		return nil
	}
	rows := [][2]string{{"subject", p.Subject}}
	if p.EventType == gateway.ProtocolBlocked {
		return append(rows, [2]string{"blocker", p.Blocker}, [2]string{"requested action", p.RequestedAction}, [2]string{"urgency", p.Urgency})
	}
	return append(rows, [2]string{"summary", p.Summary}, [2]string{"next action", p.NextAction})
}
