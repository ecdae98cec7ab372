package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
	"github.com/crosstalk-go/crosstalk/gateway/tokens"
	"github.com/crosstalk-go/crosstalk/signing"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the pages. Nil means defaults.
type Options struct {
	// Logger receives page errors; nil discards them. Bodies are never
	// logged.
	Logger *slog.Logger
	// Trust is the relay's trust store (the file its Verifier pins keys
	// in), shown and edited on the trust page; nil shows no keys and
	// refuses changes.
	Trust *signing.TrustStore
	// Admins are the token principals that may change the trust store
	// and mint tokens. Without tokens the local user always may; with
	// tokens only these.
	Admins []string
	// Tokens is the store of minted bearer tokens (`crosstalk token new`);
	// when set, the trust page has a button that mints one for the browser
	// extension. Nil hides it.
	Tokens *tokens.Store
	// Secure marks the session cookie Secure even on plain-HTTP requests,
	// for a relay behind a TLS-terminating proxy. Requests that arrive
	// over TLS always get a Secure cookie.
	Secure bool
	// SessionTTL is how long a session lasts after its last use;
	// DefaultSessionTTL when zero.
	SessionTTL time.Duration
	// Heartbeat is the interval of comments on the live streams;
	// api.DefaultHeartbeat when zero.
	Heartbeat time.Duration
	// Reservations are the relay's scope reservations, shown on the
	// reservations page; nil shows that page empty.
	Reservations *reserve.Service
}

// Server is the relay's listener with the pages: the API and, at "/" and
// under /ui/, the web inbox (docs/design.md §5.6, issue 8). It is an http.Handler.
type Server struct {
	relay     *gateway.Relay
	handler   http.Handler
	api       *api.Server
	log       *slog.Logger
	trust     *signing.TrustStore
	tokens    *tokens.Store
	admins    map[string]bool
	secure    bool
	heartbeat time.Duration
	resv      *reserve.Service
	sessions  *sessions
	pages     map[string]*template.Template
	static    fs.FS
	unreads   unreads // the groups page's counts
}

// pageNames are the templates under templates/ that are whole pages; each
// is parsed with layout.html and item.html.
var pageNames = []string{"index", "group", "thread", "agents", "agent", "handoffs", "paste", "compose", "trust", "confirm", "token", "login", "error", "reservations"}

// New returns the handler for the relay's whole listener: a, and the pages
// mounted on it with a.Mount, so that they sit behind the API's gate
// (Host, Origin, tokens, rate limit). It fails only if the embedded
// templates do not parse.
func New(relay *gateway.Relay, a *api.Server, opts *Options) (*Server, error) {
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{
		relay: relay, api: a, log: opts.Logger, trust: opts.Trust, tokens: opts.Tokens, admins: map[string]bool{},
		secure: opts.Secure, heartbeat: opts.Heartbeat, resv: opts.Reservations, sessions: newSessions(opts.SessionTTL),
		pages: map[string]*template.Template{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.heartbeat <= 0 {
		s.heartbeat = api.DefaultHeartbeat
	}
	for _, p := range opts.Admins {
		s.admins[strings.ToLower(p)] = true
	}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/item.html", "templates/pagelinks.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	st, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("web: static files: %w", err)
	}
	s.static = st
	s.handler = a.Mount(s.routes())
	return s, nil
}

// ServeHTTP serves the API and the pages.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

var funcs = template.FuncMap{
	"lower":       strings.ToLower,
	"pathSegment": client.PathSegment,
	// show writes a user-supplied name with invisible and bidi characters
	// visible; templates put it in <bdi> so it cannot reorder the page.
	"show":         envelope.ShowInvisible,
	"showBidi":     envelope.ShowBidi, // free text: META values, HANDOFF fields, notes
	"humanTime":    humanTime,
	"clock":        func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"threadLink":   threadLink,
	"protocolRows": protocolRows,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			if k, ok := kv[i].(string); ok {
				m[k] = kv[i+1]
			}
		}
		return m
	},
}

func (s *Server) routes() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /ui/static/{file}", s.serveStatic)
	m.HandleFunc("GET /{$}", s.wrap(s.index))
	m.HandleFunc("GET /ui/groups/{group}", s.wrap(s.group))
	m.HandleFunc("GET /ui/groups/{group}/threads/{thread}", s.wrap(s.thread))
	m.HandleFunc("GET /ui/groups/{group}/stream", s.wrap(s.stream))
	m.HandleFunc("GET /ui/changes", s.wrap(s.changes))
	m.HandleFunc("POST /ui/groups/{group}/read", s.wrap(s.markRead))
	m.HandleFunc("GET /ui/handoffs", s.wrap(s.handoffs))
	m.HandleFunc("GET /ui/events/{id}", s.wrap(s.event))
	m.HandleFunc("GET /ui/agents", s.wrap(s.agents))
	m.HandleFunc("GET /ui/agents/{agent}", s.wrap(s.agent))
	m.HandleFunc("POST /ui/agents/{agent}/act", s.wrap(s.act))
	m.HandleFunc("GET /ui/reservations", s.wrap(s.reservations))
	m.HandleFunc("GET /ui/paste", s.wrap(s.paste))
	m.HandleFunc("POST /ui/paste", s.wrap(s.pastePost))
	m.HandleFunc("GET /ui/compose", s.wrap(s.compose))
	m.HandleFunc("POST /ui/compose", s.wrap(s.composePost))
	m.HandleFunc("GET /ui/trust", s.wrap(s.trustPage))
	m.HandleFunc("POST /ui/trust/token", s.wrap(s.mintToken))
	m.HandleFunc("POST /ui/trust/{op}", s.wrap(s.trustPost))
	m.HandleFunc("POST /ui/login", s.wrap(s.login))
	m.HandleFunc("POST /ui/logout", s.wrap(s.logout))
	m.HandleFunc("POST /ui/viewas", s.wrap(s.viewAs))
	m.HandleFunc("/", s.wrap(func(w http.ResponseWriter, r *http.Request, c *call) {
		s.fail(w, r, c, http.StatusNotFound, "not_found", "no page at "+r.URL.Path)
	}))
	return m
}

// call is what the pages know about one request's caller.
type call struct {
	sess      session
	principal string // "" when not logged in (tokens configured)
	bearer    bool   // authenticated by an Authorization header
	local     bool   // no tokens: the local user (docs/design.md §5.6)
	viewer    string // the agent whose cursors, queue and acks the pages show
	flash     string
}

// admin reports whether the caller may change the trust store.
func (s *Server) admin(c *call) bool {
	return c.local || s.admins[strings.ToLower(c.principal)]
}

// mayActAs reports whether the caller may act as agent: the local user as
// anyone (the X-Crosstalk-Agent rule of docs/configuration.md, not a
// security boundary), a principal only as itself.
func (s *Server) mayActAs(c *call, agent string) bool {
	if c.local {
		return true
	}
	book := s.relay.Book()
	return c.principal != "" && book.ActorID(agent) == book.ActorID(c.principal) // exactly, as the API's agentOf
}

// wrap resolves the caller (gate principal, session cookie), checks the
// CSRF token of every POST, asks anonymous callers to log in, and sets the
// security headers.
func (s *Server) wrap(h func(http.ResponseWriter, *http.Request, *call)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		p, bearer := api.Principal(r)
		c := &call{principal: p, bearer: bearer, local: p == api.LocalUser && !bearer}
		sess, ok := s.sessions.get(r)
		if ok && sess.principal != "" {
			// The token of the login must still be valid: a revoked
			// token (crosstalk token revoke) ends its sessions at once.
			if p, live := s.api.TokenPrincipal(sess.token); !live || p != sess.principal {
				s.sessions.remove(sess.id)
				sess, ok = session{}, false
			}
		}
		if !ok && !bearer {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				s.fail(w, r, c, http.StatusForbidden, string(envelope.CodePerm), "no session: reload the page and try again")
				return
			}
			if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
				// A link from another site: the SameSite=Strict cookie was
				// held back. Reload from here so it is sent, rather than
				// replace the session with a new one.
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				fmt.Fprint(w, `<!doctype html><meta http-equiv="refresh" content="0"><title>crosstalk</title><p>Loading…`)
				return
			}
			sess = s.sessions.create("", "")
			http.SetCookie(w, sess.cookie(s.secureFor(r)))
		}
		c.sess = sess
		if c.principal == "" {
			c.principal = sess.principal
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		}
		if r.Method == http.MethodPost && !bearer {
			tok := r.Header.Get(csrfHeader)
			if tok == "" {
				tok = r.PostFormValue(csrfField)
			}
			if !sess.validCSRF(tok) {
				s.fail(w, r, c, http.StatusForbidden, string(envelope.CodePerm), "missing or wrong CSRF token: reload the page and try again")
				return
			}
		}
		c.viewer = c.principal
		if c.local && sess.viewAs != "" {
			c.viewer = sess.viewAs
		}
		if c.principal == "" && r.URL.Path != "/ui/login" {
			s.render(w, r, c, http.StatusUnauthorized, "login", "Log in", loginData{Next: r.URL.RequestURI()})
			return
		}
		unescapeThread(r)
		if err := api.NormalizePathNames(r, s.relay.Store()); err != nil {
			s.fail(w, r, c, http.StatusBadRequest, string(envelope.CodeAddress), err.Error())
			return
		}
		if r.Method == http.MethodGet {
			c.flash = s.sessions.takeFlash(sess.id)
		}
		if !bearer && !c.local && sess.token != "" {
			r = api.WithLogin(r, sess.principal, sess.token) // its streams end with the token
		}
		h(w, r, c)
	}
}

func (s *Server) secureFor(r *http.Request) bool { return s.secure || r.TLS != nil }

// securityHeaders keep the pages from running anything but their own
// script, from being framed, and from leaking URLs.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: it makes browsers send "Origin: null" on our own POSTs
	h.Set("Cache-Control", "no-store")
}

// page is what every page template gets.
type page struct {
	Title     string
	Nav       string
	CSRF      string
	Principal string
	Local     bool
	Viewer    string
	Agents    []string
	Flash     string
	Path      string // the page's own path, for forms that come back to it
	Data      any
}

// render executes a page template into a buffer first, so that a
// template error gives a clean 500 instead of half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, c *call, status int, name, title string, data any) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "web: no template "+name, http.StatusInternalServerError)
		return
	}
	p := page{Title: title, Nav: name, CSRF: c.sess.csrf, Principal: c.principal, Local: c.local, Viewer: c.viewer, Flash: c.flash, Path: r.URL.RequestURI(), Data: data}
	if c.local {
		p.Agents = s.knownAgents()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		s.log.Error("rendering page", "page", name, "err", err)
		http.Error(w, "web: rendering "+name+" failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// errorData is the error page's data.
type errorData struct {
	Status  int
	Code    string
	Message string
}

// fail answers with the error page: the status, the code (E-PERM,
// not_found, …) and the message, as text.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, c *call, status int, code, msg string) {
	s.render(w, r, c, status, "error", http.StatusText(status), errorData{Status: status, Code: code, Message: msg})
}

// redirect answers a POST with 303 to a local path, with a flash message
// for the next page.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, c *call, to, flash string) {
	if flash != "" {
		s.sessions.update(c.sess.id, func(ss *session) { ss.flash = flash })
	}
	http.Redirect(w, r, localPath(to), http.StatusSeeOther)
}

// localPath returns p if it is a path on this site, else "/": redirects
// never leave the relay. A browser drops tabs and newlines from a URL and
// reads a backslash as a slash, so "/\t/evil.example" would leave it as
// "//evil.example": a path holding either is refused whole.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") ||
		strings.ContainsFunc(p, func(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }) {
		return "/"
	}
	return p
}

// knownAgents lists the actors a local user may view the pages as: the
// address book, agents seen recently, and the local user.
func (s *Server) knownAgents() []string {
	set := map[string]bool{api.LocalUser: true}
	for _, a := range s.relay.Book().Agents() {
		set[a.ID] = true
	}
	for a := range s.relay.LastSeen() {
		set[a] = true
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// serveStatic serves the embedded script and style sheet.
func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) {
	name := path.Clean(r.PathValue("file"))
	b, err := fs.ReadFile(s.static, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}
