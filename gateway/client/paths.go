package client

import (
	"net/url"
	"strings"
)

// PathSegment is name (a group, thread or agent) as one segment of a
// path of the API or the web inbox: url.PathEscape's form, except that a
// name of one or two dots after any number of tildes ("." "..", "~.",
// "~~..") gets one more tilde in front. Clients drop or climb a "." or
// ".." segment — written "%2E" too, by the URL standard — and Go's
// ServeMux redirects to the cleaned path, so a group named "." would be
// unreachable; "~." and "~.." are ordinary segments. FromSegment undoes
// it; other names, a group "~deploy" among them, are their own segment
// (docs/agents.md, "Names in paths").
func PathSegment(name string) string {
	if tildeDots(name) {
		name = "~" + name
	}
	return url.PathEscape(name)
}

// FromSegment is the name a decoded path segment stands for: seg less
// one leading tilde when it is tildes and then one or two dots (what
// PathSegment writes for "." and ".."), seg itself otherwise.
func FromSegment(seg string) string {
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
