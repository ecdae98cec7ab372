package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/signing"
)

// maxTrustEvents bounds the ledger events the trust page lists.
const maxTrustEvents = 200

// trustScan is how many of the ledger's events, newest first, one view
// of the trust page reads at most, looking for first-use and key-changed
// envelopes; an "older" link reads the next window. Without it every
// view read the whole ledger.
const trustScan = 2000

// trustRow is one pinned key.
type trustRow struct {
	Pkid, Alg, Fingerprint string
	Source, FirstSeen      string
	Sender                 string
	Revoked                bool
}

// trustEvent is an envelope whose check pinned a key or found it changed
// (data.x_crosstalk.verification first-use or key-changed).
type trustEvent struct {
	Group, Thread, EventID string
	Seq                    int64
	Time                   string
	Status, StatusClass    string
	Sender, Pkid           string
	Announced              string // fingerprint of the key in `meta: signing`, if any
	Pinned                 string // fingerprint pinned now, if any
	CanRepin               bool
}

type trustData struct {
	Configured bool
	Admin      bool
	CanMint    bool // the button that mints a token for the browser extension
	Path       string
	Entries    []trustRow
	Events     []trustEvent
	pageLinks
}

// trustPage lists pinned keys and the first-use and key-changed events of
// the ledger, with re-pin and revoke actions.
func (s *Server) trustPage(w http.ResponseWriter, r *http.Request, c *call) {
	data := trustData{Configured: s.trust != nil, Admin: s.admin(c)}
	data.CanMint = data.Admin && s.tokens != nil
	pinned := map[string]*signing.PublicKey{}
	if s.trust != nil {
		data.Path = s.trust.Path()
		es, err := s.trust.Entries()
		if err != nil {
			s.log.Error("reading the trust store", "err", err)
			s.fail(w, r, c, http.StatusInternalServerError, gateway.CodeInternal, "the trust store could not be read; see the relay's log")
			return
		}
		for _, e := range es {
			row := trustRow{Pkid: e.Key.Pkid, Alg: string(e.Key.Alg()), Fingerprint: e.Key.Fingerprint(), Source: string(e.Source), Sender: e.Sender, Revoked: e.Revoked}
			if !e.FirstSeen.IsZero() {
				row.FirstSeen = e.FirstSeen.UTC().Format("2006-01-02 15:04Z")
			}
			data.Entries = append(data.Entries, row)
			pinned[e.Key.Pkid] = e.Key
		}
	}
	cur, err := pageCursor(r)
	if err != nil || cur.After > 0 {
		s.fail(w, r, c, http.StatusBadRequest, gateway.CodeInvalid, "bad page: give ?before=N (a ledger position)")
		return
	}
	evs, olderPos, err := s.trustEvents(r.Context(), cur.Before)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	if olderPos > 0 {
		data.Older = link("/ui/trust", "before", olderPos)
	}
	if cur.Before > 0 {
		data.Newer = "/ui/trust"
	}
	for i := range evs {
		if k, ok := pinned[evs[i].Pkid]; ok {
			evs[i].Pinned = k.Fingerprint()
		}
		evs[i].CanRepin = data.Admin && s.trust != nil && evs[i].Status == gateway.StatusKeyChanged && evs[i].Announced != "" && evs[i].Announced != evs[i].Pinned
	}
	data.Events = evs
	s.render(w, r, c, http.StatusOK, "trust", "Trust", data)
}

// trustEvents returns the first-use and key-changed envelopes among the
// ledger's events before log position before (the whole log when 0),
// newest first: at most maxTrustEvents of them, from at most trustScan
// events. older is the position the next older page reads before, 0
// when the log's start was reached.
func (s *Server) trustEvents(ctx context.Context, before int64) (out []trustEvent, older int64, err error) {
	const page = 1000
	scanned := 0
	for scanned < trustScan && len(out) < maxTrustEvents {
		ls, err := s.relay.Store().LogBefore(ctx, before, page)
		if err != nil {
			return nil, 0, err
		}
		for _, l := range ls {
			before, scanned = l.Pos, scanned+1
			ev := l.Event
			d, err := gateway.ParseData(ev)
			if err != nil || d.X == nil {
				continue
			}
			x := d.X
			if x.Verification != gateway.StatusFirstUse && x.Verification != gateway.StatusKeyChanged {
				continue
			}
			te := trustEvent{Group: ev.GroupID, EventID: ev.ID, Seq: ev.Seq, Time: humanTime(ev.TS), Status: x.Verification,
				StatusClass: statusClass(x.Verification), Sender: x.Sender, Pkid: x.Pkid}
			if x.Envelope != nil {
				te.Thread = x.Envelope.Thread
				if k, err := announcedKey(x); err == nil {
					te.Announced = k.Fingerprint()
				}
			}
			out = append(out, te)
			if len(out) == maxTrustEvents {
				break
			}
		}
		if len(ls) < page && len(out) < maxTrustEvents {
			return out, 0, nil // the log's start
		}
	}
	if before <= 1 {
		before = 0
	}
	return out, before, nil
}

// announcedKey returns the key an envelope announced in `meta: signing`
// Public-Key (docs/design.md §4.3), under the key id its signature named.
func announcedKey(x *gateway.XCrosstalk) (*signing.PublicKey, error) {
	if x.Envelope == nil || x.Pkid == "" {
		return nil, fmt.Errorf("web: no signed envelope")
	}
	v, ok := x.Envelope.MetaValue("signing", "Public-Key")
	if !ok {
		return nil, fmt.Errorf("web: the envelope announces no key")
	}
	return signing.ParsePublicKeyValue(x.Pkid, v)
}

// confirmData is the confirmation step of a trust change.
type confirmData struct {
	Op       string // "pin" or "revoke"
	Pkid     string
	Event    string
	Old, New string // fingerprints
	Sender   string
}

// trustPost re-pins a key announced by a key-changed envelope (op pin,
// field event) or revokes a pinned key (op revoke, field pkid). Without
// confirm=yes it only shows what would change and asks to confirm.
func (s *Server) trustPost(w http.ResponseWriter, r *http.Request, c *call) {
	if s.trust == nil {
		s.fail(w, r, c, http.StatusNotFound, gateway.CodeNotFound, "the relay has no trust store")
		return
	}
	if !s.admin(c) {
		s.fail(w, r, c, http.StatusForbidden, string(envelope.CodePerm), c.principal+" may not change the trust store")
		return
	}
	confirmed := r.PostFormValue("confirm") == "yes"
	switch op := r.PathValue("op"); op {
	case "pin":
		id := r.PostFormValue("event")
		ev, err := s.relay.Store().Get(r.Context(), id)
		if err != nil {
			s.fail(w, r, c, http.StatusNotFound, gateway.CodeNotFound, "no event "+id)
			return
		}
		d, err := gateway.ParseData(ev)
		if err != nil || d.X == nil {
			s.fail(w, r, c, http.StatusBadRequest, gateway.CodeInvalid, "event "+id+" holds no envelope")
			return
		}
		key, err := announcedKey(d.X)
		if err != nil {
			s.fail(w, r, c, http.StatusBadRequest, gateway.CodeInvalid, "event "+id+": "+err.Error())
			return
		}
		cd := confirmData{Op: op, Pkid: key.Pkid, Event: id, New: key.Fingerprint(), Sender: d.X.Sender}
		if e, ok, err := s.trust.Lookup(key.Pkid); err == nil && ok {
			cd.Old = e.Key.Fingerprint()
		}
		if !confirmed {
			s.render(w, r, c, http.StatusOK, "confirm", "Confirm re-pin", cd)
			return
		}
		if err := s.trust.Pin(key); err != nil {
			s.fail(w, r, c, http.StatusConflict, gateway.CodeConflict, err.Error())
			return
		}
		s.log.Info("key re-pinned from the web page", "pkid", key.Pkid, "fingerprint", cd.New, "by", c.principal)
		s.redirect(w, r, c, "/ui/trust", "pinned "+key.Pkid+" to "+cd.New)
	case "revoke":
		pkid := r.PostFormValue("pkid")
		e, ok, err := s.trust.Lookup(pkid)
		if err != nil || !ok {
			s.fail(w, r, c, http.StatusNotFound, gateway.CodeNotFound, "no pinned key "+pkid)
			return
		}
		cd := confirmData{Op: op, Pkid: pkid, Old: e.Key.Fingerprint(), Sender: e.Sender}
		if !confirmed {
			s.render(w, r, c, http.StatusOK, "confirm", "Confirm revocation", cd)
			return
		}
		if err := s.trust.Revoke(pkid, nil); err != nil {
			s.fail(w, r, c, http.StatusConflict, gateway.CodeConflict, err.Error())
			return
		}
		s.log.Info("key revoked from the web page", "pkid", pkid, "by", c.principal)
		s.redirect(w, r, c, "/ui/trust", "revoked "+pkid)
	default:
		s.fail(w, r, c, http.StatusNotFound, gateway.CodeNotFound, "no trust action "+op)
	}
}

// tokenData is the page that shows a minted token, once.
type tokenData struct {
	Token, ID, Principal string
}

// mintToken mints a bearer token for the caller — the local user's
// principal without configured tokens, else the caller's own — for the
// browser extension (docs/web.md, "Tokens"), and shows it once.
func (s *Server) mintToken(w http.ResponseWriter, r *http.Request, c *call) {
	if s.tokens == nil {
		s.fail(w, r, c, http.StatusNotFound, gateway.CodeNotFound, "the relay mints no tokens")
		return
	}
	if !s.admin(c) {
		s.fail(w, r, c, http.StatusForbidden, string(envelope.CodePerm), c.principal+" may not mint tokens")
		return
	}
	principal := c.principal
	if c.local {
		principal = api.LocalUser
	}
	secret, t, err := s.tokens.New(principal)
	if err != nil {
		s.internal(w, r, c, err)
		return
	}
	s.log.Info("token minted from the web page", "id", t.ID, "principal", t.Principal)
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, c, http.StatusOK, "token", "New token", tokenData{Token: secret, ID: t.ID, Principal: t.Principal})
}
