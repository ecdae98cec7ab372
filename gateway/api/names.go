package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// NormalizePathNames replaces r's {group} and {agent} path values with
// the names they stand for (client.FromSegment) in their NFC form
// (envelope.NormalizeIdentifier), so that a path written in
// NFD finds the group or agent recorded in NFC. It returns the
// *envelope.IdentifierError of the first one holding an invisible or
// reordering character (docs/format.md §12) — unless it is a group that
// store already holds under exactly that name, recorded before names were
// checked, which stays readable (and is shown escaped). The web inbox
// calls it too.
func NormalizePathNames(r *http.Request, store ledger.Store) error {
	for _, name := range [...]string{"group", "agent"} {
		v := client.FromSegment(r.PathValue(name))
		if v == "" {
			continue
		}
		var n string
		var err error
		if name == "group" {
			n, err = normalizeGroup(r, store, v)
		} else {
			n, err = envelope.NormalizeIdentifier(v)
		}
		if err != nil {
			return err
		}
		r.SetPathValue(name, n)
	}
	return nil
}

// normalizeGroup returns the group name v in NFC, or v itself when it
// holds an invisible or reordering character but store already holds a
// group of exactly that name, or the *envelope.IdentifierError.
func normalizeGroup(r *http.Request, store ledger.Store, v string) (string, error) {
	n, err := envelope.NormalizeIdentifier(v)
	if err != nil {
		if evs, rerr := store.Range(r.Context(), v, 0, nil, 1); rerr == nil && len(evs) > 0 {
			return v, nil
		}
		return "", err
	}
	return n, nil
}

// queryGroup is the ?group= filter of r, normalised as a {group} path
// value is (empty when absent).
func (s *Server) queryGroup(r *http.Request) (string, error) {
	v := r.URL.Query().Get("group")
	if v == "" {
		return "", nil
	}
	return normalizeGroup(r, s.relay.Store(), v)
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

// agentHeader is the header naming the agent a request acts for (the
// local hint of docs/configuration.md). Its value is the name as UTF-8,
// or RFC 8187's percent-encoded form of it (UTF-8, two apostrophes, %XX),
// which a browser can send whatever the name (fetch refuses a header value
// outside Latin-1, and sends a Latin-1 one as single bytes).
const agentHeader = "X-Crosstalk-Agent"

// decodeAgentHeader rewrites r's X-Crosstalk-Agent to the name it stands
// for, in NFC: RFC 8187's form percent-decoded (what the browser
// extension sends), raw UTF-8 kept (the Go client, curl), and bytes that
// are not UTF-8 read as Latin-1 (what a browser sent for a name such as
// ÇA before the extension encoded it). A malformed encoding, one that is
// not UTF-8, or an invisible character is an error: the request must not
// act for a garbled name.
func decodeAgentHeader(r *http.Request) error {
	v := r.Header.Get(agentHeader)
	if v == "" {
		return nil
	}
	if len(v) >= 7 && strings.EqualFold(v[:7], "UTF-8''") {
		s, err := url.PathUnescape(v[7:])
		if err != nil {
			return fmt.Errorf("%s %q: %w", agentHeader, v, err)
		}
		if !utf8.ValidString(s) {
			return fmt.Errorf("%s %q: the percent-encoded bytes are not UTF-8", agentHeader, v)
		}
		v = s
	} else if !utf8.ValidString(v) {
		rs := make([]rune, len(v))
		for i := 0; i < len(v); i++ {
			rs[i] = rune(v[i])
		}
		v = string(rs)
	}
	n, err := envelope.NormalizeIdentifier(v)
	if err != nil {
		return fmt.Errorf("%s: %w", agentHeader, err)
	}
	r.Header.Set(agentHeader, n)
	return nil
}
