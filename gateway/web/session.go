package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// CookieName is the name of the session cookie.
const CookieName = "crosstalk_session"

// Session limits.
const (
	// DefaultSessionTTL is how long a session lasts after its last use.
	DefaultSessionTTL = 12 * time.Hour
	// maxSessions bounds the sessions kept in memory; the least recently
	// used one is dropped first.
	maxSessions = 4096
	// csrfField is the form field, and csrfHeader the header, that carry
	// the CSRF token of a POST.
	csrfField  = "csrf"
	csrfHeader = "X-CSRF-Token"
)

// session is one browser's state. Its id is the cookie value; it is kept in
// memory only, so a relay restart logs everybody out.
type session struct {
	id        string
	csrf      string
	principal string // set by the login form; "" before
	// token is the bearer token the login form was given, kept in memory
	// only (never in the cookie), so that every request can check it is
	// still valid: revoking a token ends the sessions logged in with it.
	token    string
	viewAs   string // the agent the local user views the pages as
	flash    string // a one-time message for the next page
	lastUsed time.Time
}

// sessions is the in-memory session table.
type sessions struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[string]*session
	now func() time.Time
}

func newSessions(ttl time.Duration) *sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &sessions{ttl: ttl, m: map[string]*session{}, now: time.Now}
}

// randomToken returns 32 random bytes in base64url.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand documents it)
	return base64.RawURLEncoding.EncodeToString(b)
}

// get returns a copy of the session with the cookie's id, if it is live,
// and marks it used.
func (s *sessions) get(r *http.Request) (session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[c.Value]
	if !ok {
		return session{}, false
	}
	now := s.now()
	if now.Sub(ss.lastUsed) > s.ttl {
		delete(s.m, ss.id)
		return session{}, false
	}
	ss.lastUsed = now
	return *ss, true
}

// create makes a new session for principal ("" for none yet), logged in
// with token.
func (s *sessions) create(principal, token string) session {
	ss := &session{id: randomToken(), csrf: randomToken(), principal: principal, token: token, lastUsed: s.now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxSessions {
		s.evictLocked()
	}
	s.m[ss.id] = ss
	return *ss
}

// evictLocked drops expired sessions, and if none had expired the least
// recently used one nobody logged in to — any client makes those, one per
// GET without a cookie, and must not push out the sessions of logins —
// or else the least recently used one.
func (s *sessions) evictLocked() {
	now := s.now()
	var oldest, oldestAnon *session
	for id, ss := range s.m {
		if now.Sub(ss.lastUsed) > s.ttl {
			delete(s.m, id)
			continue
		}
		if oldest == nil || ss.lastUsed.Before(oldest.lastUsed) {
			oldest = ss
		}
		if ss.principal == "" && (oldestAnon == nil || ss.lastUsed.Before(oldestAnon.lastUsed)) {
			oldestAnon = ss
		}
	}
	if oldestAnon != nil {
		oldest = oldestAnon
	}
	if len(s.m) >= maxSessions && oldest != nil {
		delete(s.m, oldest.id)
	}
}

// update applies fn to the live session id.
func (s *sessions) update(id string, fn func(*session)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.m[id]; ok {
		fn(ss)
	}
}

// takeFlash returns and clears the session's flash message.
func (s *sessions) takeFlash(id string) string {
	var f string
	s.update(id, func(ss *session) { f, ss.flash = ss.flash, "" })
	return f
}

// remove ends the session id.
func (s *sessions) remove(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// validCSRF reports whether token is the session's CSRF token.
func (ss session) validCSRF(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(ss.csrf)) == 1
}

// cookie returns the session cookie for ss: HttpOnly, SameSite=Strict,
// Secure when the page is served over TLS (or Options.Secure).
func (ss session) cookie(secure bool) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: ss.id, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

// clearCookie deletes the session cookie in the browser.
func clearCookie(secure bool) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}
