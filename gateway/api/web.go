package api

import (
	"context"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// This file is the hook for the relay's browser pages (package
// gateway/web, docs/design.md §5.6, issue 8): they are served on the API's
// listener, behind the same gate.

// PagePrefix is the path prefix of the browser pages; the page at "/"
// belongs to them too. Every other path is the API's.
const PagePrefix = "/ui/"

// IsPagePath reports whether a request path belongs to the browser pages:
// "/" or a path under PagePrefix.
func IsPagePath(path string) bool { return path == "/" || strings.HasPrefix(path, PagePrefix) }

// pageServerKey carries the *Server into page requests (OpenStream).
type pageServerKey struct{}

// Mount returns the handler for the whole listener: the API, and pages for
// every path IsPagePath accepts. Page requests pass the same gate as the
// API, in the same order — the Host header must be one of the relay's
// names; a request other than GET or HEAD must come from the relay's own
// origin (Origin, Sec-Fetch-Site); the caller is authenticated; each caller
// is rate limited — and a refused one gets 403/401 E-PERM or 429 E-RATE.
//
// Authentication differs in one point. When tokens are configured, a page
// request without an Authorization header is not refused: it reaches pages
// with an empty principal (see Principal), so that pages can authenticate
// it by their own session cookie or answer with a login form, and it is
// rate limited by remote address. A wrong bearer token is refused as on the
// API. pages must treat an empty principal as unauthenticated.
func (s *Server) Mount(pages http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsPagePath(r.URL.Path) {
			s.ServeHTTP(w, r)
			return
		}
		s.servePage(pages, w, r)
	})
}

func (s *Server) servePage(pages http.Handler, w http.ResponseWriter, r *http.Request) {
	info, ok := s.gate(w, r, true)
	if !ok {
		return
	}
	defer info.release()
	ctx := context.WithValue(r.Context(), principalKey, info)
	ctx = context.WithValue(ctx, pageServerKey{}, s)
	pages.ServeHTTP(w, r.WithContext(ctx))
}

// Handle serves pattern with h behind the API's gate (Host, Origin,
// bearer token, rate limit), like the API's own endpoints: without tokens
// only the local user reaches it, with tokens any valid token does and a
// request without one is 401; h reads the caller with Principal. The relay
// mounts its metrics ("GET /metrics", package gateway/metrics) and bridges
// that speak another protocol on the API's listener (package gateway/a2a)
// this way. Call it before serving.
// A handler that answers for long (a stream, a call that waits) calls
// OpenStream like the API's own streams.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), pageServerKey{}, s)))
	}))
}

// Principal returns the caller of a request that passed the gate: the
// principal of its bearer token (authenticated true), LocalUser when no
// tokens are configured, or "" for a page request without a token while
// tokens are configured (see Mount).
func Principal(r *http.Request) (p string, authenticated bool) {
	return principal(r)
}

// TokenPrincipal returns the principal of a bearer token — configured
// (Options.Tokens) or minted (Options.Minted) — for a login form; ok is
// false for an unknown token. Tokens are compared in constant time.
func (s *Server) TokenPrincipal(token string) (principal string, ok bool) {
	token = strings.TrimSpace(token)
	if token == "" {
		return "", false
	}
	for t, p := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			principal, ok = p, true
		}
	}
	if !ok && s.minted != nil {
		principal, ok = s.minted.Lookup(token)
	}
	return principal, ok
}

// remotePrefix is the caller an anonymous page request counts as: its
// remote IPv4 address, or the /64 of its IPv6 address — the least one
// host or network is given, so that walking its addresses gives it no
// fresh rate-limit burst or stream slots.
func (s *Server) remotePrefix(r *http.Request) string {
	h := s.remoteHost(r)
	a, err := netip.ParseAddr(h)
	if err != nil || !a.Is6() || a.Is4In6() {
		return h
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return h
	}
	return p.String()
}

// remoteHost is the caller's address: the connection's peer, or, when
// that is a trusted proxy (Options.TrustedProxies), the last address of
// X-Forwarded-For that is not one.
func (s *Server) remoteHost(r *http.Request) string {
	h := peerHost(r)
	if peer, err := netip.ParseAddr(h); len(s.proxies) == 0 || err != nil || !s.trustedProxy(peer) {
		return h
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return h // not an address: the proxy's own count
		}
		if !s.trustedProxy(a) {
			return a.WithZone("").Unmap().String()
		}
	}
	return h
}

// trustedProxy reports whether a is one of the trusted proxies.
func (s *Server) trustedProxy(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerHost is the address of the connection's peer.
func peerHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}
