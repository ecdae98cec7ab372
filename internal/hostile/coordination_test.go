package hostile

import (
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// cli runs the built crosstalk binary as principal against r and returns
// its exit status and output.
func (r *relay) cli(principal string, args ...string) (int, string) {
	r.t.Helper()
	cmd := exec.Command(crosstalkBinary(r.t), args...)
	cmd.Env = append(cmd.Environ(), "CROSSTALK_RELAY="+r.url, "CROSSTALK_TOKEN="+tokens[principal])
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		r.t.Fatalf("crosstalk %s: %v", strings.Join(args, " "), err)
	}
	return 0, string(out)
}

// TestReserveRefusesBadTTLAndScopes: a TTL of zero is a mistake, not a
// request for the 30-minute default, and a scope a reader cannot see
// as written (bidi or invisible characters) is refused, not granted.
func TestReserveRefusesBadTTLAndScopes(t *testing.T) {
	r := startRelay(t, baseConfig(""))
	for _, ttl := range []string{"0", "0s", "-1s", "500ms", "169h"} {
		if code, out := r.cli("alice", "reserve", "--agent", "alice", "--ttl", ttl, "src/x"); code != 2 {
			t.Errorf("reserve --ttl %s: exit %d, want 2 (usage)\n%s", ttl, code, out)
		}
	}
	for _, args := range [][]string{
		{"reserve", "--agent", "alice", "../x"},
		{"reserve", "--agent", "alice", "src/ok", "/etc"},
		{"release", "--agent", "alice", "src/../../x"},
		{"reservations", "--path", "C:\\x"},
	} {
		if code, out := r.cli("alice", args...); code != 2 {
			t.Errorf("crosstalk %s: exit %d, want 2 (usage; 1 means another agent holds it)\n%s", strings.Join(args, " "), code, out)
		}
	}
	for _, body := range []string{
		`{"agent":"alice","scopes":["src/x"],"ttl":"0s"}`,
		`{"agent":"alice","scopes":["src/\u202egnp.exe"]}`,
		`{"agent":"alice","scopes":["src/a\u200bb"]}`,
	} {
		if a := r.do(http.MethodPost, "/v1/reservations", "alice", []byte(body), nil); a.status != http.StatusBadRequest {
			t.Errorf("POST /v1/reservations %s = %d %s, want 400", body, a.status, a.body)
		}
	}
	if a := r.do(http.MethodGet, "/v1/reservations", "alice", nil, nil); !strings.Contains(string(a.body), `"reservations":[]`) {
		t.Errorf("after refused requests, GET /v1/reservations = %s, want none", a.body)
	}
}
