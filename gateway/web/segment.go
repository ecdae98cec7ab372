package web

import (
	"net/http"

	"github.com/crosstalk-go/crosstalk/gateway/api"
)

// pathSegment is name as one segment of an inbox path (api.PathSegment:
// "." and ".." get a tilde in front, since browsers and ServeMux clean
// such segments).
func pathSegment(name string) string { return api.PathSegment(name) }

// unescapeThread replaces r's {thread} path value with the name it
// stands for (api.FromSegment); api.NormalizePathNames does so for
// {group} and {agent}.
func unescapeThread(r *http.Request) {
	if v := r.PathValue("thread"); v != "" {
		r.SetPathValue("thread", api.FromSegment(v))
	}
}
