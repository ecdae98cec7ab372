package api_test

import (
	"net/http"
	"testing"
)

// TestUnroutedRequestsAnswerJSON: a path the API does not serve, or a
// method an endpoint does not take, gets the API's JSON error body like
// every other refusal — not net/http's plain-text "404 page not found" —
// and a 405 keeps its Allow header.
func TestUnroutedRequestsAnswerJSON(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/nothing", http.StatusNotFound, "not_found", ""},
		{"GET", "/crosstalk", http.StatusNotFound, "not_found", ""},
		{"PUT", "/v1/send", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{"DELETE", "/v1/groups", http.StatusMethodNotAllowed, "method_not_allowed", "GET, HEAD"},
		{"GET", "/crosstalk/receive", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
	} {
		var out struct {
			Error struct{ Code, Message string }
		}
		h.json(tc.method, tc.path, "", tc.status, &out)
		if out.Error.Code != tc.code || out.Error.Message == "" {
			t.Errorf("%s %s = %+v, want code %s and a message", tc.method, tc.path, out.Error, tc.code)
		}
		if tc.allow != "" {
			res, err := doRaw(h, tc.method, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Header.Get("Allow"); got != tc.allow {
				t.Errorf("%s %s: Allow = %q, want %q", tc.method, tc.path, got, tc.allow)
			}
		}
	}
	// A path that is only not canonical still redirects.
	if status, _ := h.do("GET", "/v1//groups", ""); status != http.StatusMovedPermanently && status != http.StatusOK {
		t.Errorf("GET /v1//groups = %d, want the mux's redirect", status)
	}
}

func doRaw(h *harness, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.srv.URL+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := h.srv.Client().Do(req)
	if err == nil {
		res.Body.Close()
	}
	return res, err
}
