package web

import (
	"net/http"

	"github.com/crosstalk-go/crosstalk/gateway/client"
)

// unescapeThread replaces r's {thread} path value with the name it
// stands for (client.FromSegment); api.NormalizePathNames does so for
// {group} and {agent}.
func unescapeThread(r *http.Request) {
	if v := r.PathValue("thread"); v != "" {
		r.SetPathValue("thread", client.FromSegment(v))
	}
}
