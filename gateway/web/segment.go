package web

import (
	"net/http"
	"net/url"
	"strings"
)

// pathSegment is name as one segment of an inbox path: url.PathEscape's
// form, except that a name of one or two dots after any number of tildes
// ("." "..", "~.", "~~..") gets one more tilde in front. A browser drops
// or climbs a "." or ".." segment — written "%2E" too, by the URL
// standard — and Go's ServeMux redirects to the cleaned path, so the
// group (or thread, or agent) named "." would be unreachable; "~." and
// "~.." are ordinary segments. fromSegment undoes it; other names, a
// group "~deploy" among them, are their own segment as before.
func pathSegment(name string) string {
	if tildeDots(name) {
		name = "~" + name
	}
	return url.PathEscape(name)
}

// fromSegment is the name a decoded path segment stands for: seg less
// one leading tilde when it is tildes and then one or two dots (what
// pathSegment writes for "." and ".."), seg itself otherwise.
func fromSegment(seg string) string {
	if strings.HasPrefix(seg, "~") && tildeDots(seg) {
		return seg[1:]
	}
	return seg
}

// tildeDots reports whether s is any number of tildes and then "." or "..".
func tildeDots(s string) bool {
	s = strings.TrimLeft(s, "~")
	return s == "." || s == ".."
}

// pathNames are the path values the inbox's routes name people's words
// with: written by pathSegment, read back by fromSegment.
var pathNames = [...]string{"group", "thread", "agent"}

// unescapePathNames replaces r's {group}, {thread} and {agent} path
// values with the names they stand for (fromSegment).
func unescapePathNames(r *http.Request) {
	for _, k := range pathNames {
		if v := r.PathValue(k); v != "" {
			r.SetPathValue(k, fromSegment(v))
		}
	}
}
