package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// TestCheckConfig: --check-config exits 0 for a config the relay would
// start with, non-zero with the field at fault otherwise, and creates
// nothing (no data dir, no ledger).
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "missing.key")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	for _, tc := range []struct {
		name, toml string
		code       int
		out        string // in stdout when 0, stderr otherwise
	}{
		{"defaults", ``, exitOK, "ok"},
		{"tokens on any address", `listen = "0.0.0.0:7777"
[[tokens]]
token_file = "` + tokenFile + `"
principal = "claude"`, exitOK, "1 tokens"},
		{"not loopback without tokens", `listen = "0.0.0.0:7777"`, exitFailure, "not loopback"},
		{"unknown key", `lissen = "127.0.0.1:1"`, exitFailure, "unknown keys: lissen"},
		{"bad log level", `log_level = "loud"`, exitFailure, "log_level"},
		{"negative shutdown timeout", `shutdown_timeout = "-1s"`, exitFailure, "shutdown_timeout"},
		{"missing token file", `[[tokens]]
token_file = "` + filepath.Join(dir, "nope") + `"
principal = "x"`, exitFailure, "token_file"},
		{"missing signing key", `[[agents]]
id = "claude"
signing_key = "` + key + `"`, exitFailure, "signing_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "relay.toml")
			toml := "data_dir = " + quote(data) + "\ntrust_file = " + quote(filepath.Join(dir, "known_keys")) + "\n" + tc.toml + "\n"
			if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{"relay", "--check-config", "--config", cfg}, strings.NewReader(""), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, stdout.String(), stderr.String())
			}
			out := stdout.String()
			if code != exitOK {
				out = stderr.String()
			}
			if !strings.Contains(out, tc.out) {
				t.Errorf("output %q lacks %q", out, tc.out)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("--check-config created the data dir (%v)", err)
			}
		})
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `\`, `\\`) + `"` }

// TestShutdownDeadline: a request that never ends cannot hold the relay
// past shutdown_timeout; shutdown returns an error naming the drain, and
// the ledger is closed.
func TestShutdownDeadline(t *testing.T) {
	r := startTestRelay(t, t.TempDir(), func(c *Config) { c.ShutdownTimeout = duration(100 * time.Millisecond) })
	// A POST whose body never comes: once the server asks for it (100
	// Continue), its handler is waiting for the body.
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /crosstalk/receive HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n", strings.TrimPrefix(r.url, "http://"))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "100 Continue") {
		t.Fatalf("server answered %q, %v; want 100 Continue", line, err)
	}
	err = r.shutdown()
	if err == nil || !strings.Contains(err.Error(), "draining requests") {
		t.Fatalf("shutdown with a request in flight past the deadline = %v, want a draining error", err)
	}
	// The ledger's close may finish after a shutdown that ran out of time
	// (it goes on in the background); it must finish, not be skipped.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := r.store.Groups(context.Background()); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ledger is still open 10 s after shutdown")
		}
	}
}

// TestServiceFiles: the systemd unit and the launchd plist in docs/service
// run commands this binary accepts with the example config, and give the
// relay more time to stop than its default shutdown_timeout.
func TestServiceFiles(t *testing.T) {
	unit, err := os.ReadFile("../../docs/service/crosstalk.service")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, args []string) {
		t.Helper()
		if len(args) < 2 || filepath.Base(args[0]) != "crosstalk" || args[1] != "relay" {
			t.Fatalf("%s runs %q, want crosstalk relay", what, args)
		}
		args = append([]string(nil), args[1:]...)
		for i, a := range args {
			if a == "/etc/crosstalk/relay.toml" {
				args[i] = "../../docs/service/relay.toml"
			}
		}
		if !slices.Contains(args, "--check-config") {
			args = append(args, "--check-config")
		}
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Errorf("%s: crosstalk %s = exit %d: %s", what, strings.Join(args, " "), code, stderr.String())
		}
	}
	var stop time.Duration
	for _, line := range strings.Split(string(unit), "\n") {
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok || strings.HasPrefix(line, "#"):
		case k == "ExecStart" || k == "ExecStartPre":
			check("crosstalk.service "+k, strings.Fields(v))
		case k == "TimeoutStopSec":
			if stop, err = time.ParseDuration(v); err != nil {
				t.Fatalf("TimeoutStopSec=%s: %v", v, err)
			}
		}
	}
	if stop <= defaultShutdownTimeout {
		t.Errorf("crosstalk.service TimeoutStopSec = %v, want more than shutdown_timeout's default %v", stop, defaultShutdownTimeout)
	}

	plist, err := os.ReadFile("../../docs/service/org.crosstalk.relay.plist")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Dict struct {
			Items []struct {
				XMLName xml.Name
				Text    string   `xml:",chardata"`
				Strings []string `xml:"string"`
			} `xml:",any"`
		} `xml:"dict"`
	}
	if err := xml.Unmarshal(plist, &doc); err != nil {
		t.Fatalf("the plist is not XML: %v", err)
	}
	values := map[string]int{} // key → index of its value
	items := doc.Dict.Items
	for i := 0; i+1 < len(items); i++ {
		if items[i].XMLName.Local == "key" {
			values[items[i].Text] = i + 1
		}
	}
	i, ok := values["ProgramArguments"]
	if !ok || items[i].XMLName.Local != "array" {
		t.Fatalf("plist has no ProgramArguments array")
	}
	check("org.crosstalk.relay.plist", items[i].Strings)
	i, ok = values["ExitTimeOut"]
	if !ok {
		t.Fatal("plist has no ExitTimeOut (launchd's default, 20 s, is barely above shutdown_timeout)")
	}
	if n, err := strconv.Atoi(strings.TrimSpace(items[i].Text)); err != nil || time.Duration(n)*time.Second <= defaultShutdownTimeout {
		t.Errorf("plist ExitTimeOut = %q, want more seconds than shutdown_timeout's default %v", items[i].Text, defaultShutdownTimeout)
	}
}

// TestRelayMetrics: the relay serves /metrics, wired to its intake.
func TestRelayMetrics(t *testing.T) {
	r := startTestRelay(t, t.TempDir(), nil)
	defer r.shutdown()
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "metrics?")
	b, _ := envelope.Marshal(e)
	if _, ok := postEnvelope(r.url, string(b)); !ok {
		t.Fatal("POST failed")
	}
	resp, err := http.Get(r.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics = %s, does not parse: %v", resp.Status, err)
	}
	value := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 {
			return -1
		}
		m := f.Metric[0]
		return m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
	}
	for name, want := range map[string]float64{
		"crosstalk_envelopes_received_total":     1,
		"crosstalk_ledger_events_appended_total": 1,
		"crosstalk_must_respond_open":            1, // chatgpt is not in the book: agent="other"
	} {
		if got := value(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// The default SQLite ledger's group commit is watched: the envelope's
	// append was committed and fsynced.
	for _, name := range []string{"crosstalk_sqlite_commits_total", "crosstalk_sqlite_fsyncs_total"} {
		if got := value(name); got < 1 {
			t.Errorf("%s = %v, want ≥ 1", name, got)
		}
	}
}
