package api

import "net/http"

// Handle adds an endpoint to the API behind the same gate as every other
// one (Host, Origin, bearer token, rate limit): without tokens only the
// local user reaches it, with tokens any valid token does and a request
// without one is 401. The relay mounts its metrics this way
// ("GET /metrics", package gateway/metrics). Call it before serving.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }
