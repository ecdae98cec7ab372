package browser_test

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/transports/browser"
)

// TestManifestExposesNothing checks the extension's manifest for what would
// open it to web pages or other extensions (docs/web.md "Browser
// extension"): no resource a page can load, no page or extension that may
// message it, host permissions for loopback only at install, no eval in its
// own pages.
func TestManifestExposesNothing(t *testing.T) {
	b, err := fs.ReadFile(browser.Files, "ext/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		WebAccessible         json.RawMessage   `json:"web_accessible_resources"`
		ExternallyConnectable json.RawMessage   `json:"externally_connectable"`
		Permissions           []string          `json:"permissions"`
		HostPermissions       []string          `json:"host_permissions"`
		CSP                   map[string]string `json:"content_security_policy"`
		ContentScripts        []struct {
			Matches   []string `json:"matches"`
			AllFrames bool     `json:"all_frames"`
		} `json:"content_scripts"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.WebAccessible != nil {
		t.Errorf("web_accessible_resources = %s: pages could load (and fingerprint, or frame) the extension's files", m.WebAccessible)
	}
	if m.ExternallyConnectable != nil {
		t.Errorf("externally_connectable = %s: pages or extensions could message the background", m.ExternallyConnectable)
	}
	loopback := func(p string) bool { return p == "http://127.0.0.1/*" || p == "http://localhost/*" }
	for _, p := range m.HostPermissions {
		if !loopback(p) {
			t.Errorf("host_permissions holds %q: beyond loopback, sites are asked for one by one (optional_host_permissions)", p)
		}
	}
	for _, cs := range m.ContentScripts {
		for _, p := range cs.Matches {
			if !loopback(p) {
				t.Errorf("content_scripts match %q at install: sites get the script only once granted", p)
			}
		}
		if cs.AllFrames {
			t.Error("content_scripts run in all frames: a page's frames would get controls too")
		}
	}
	for _, p := range m.Permissions {
		switch p {
		case "storage", "scripting", "clipboardWrite", "activeTab":
		default:
			t.Errorf("permission %q is not one the extension needs (docs/web.md)", p)
		}
	}
	csp := m.CSP["extension_pages"]
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "'unsafe-eval'") || strings.Contains(csp, "'unsafe-inline'") || strings.Contains(csp, "http") {
		t.Errorf("content_security_policy.extension_pages = %q: want script-src 'self' (and 'wasm-unsafe-eval') only", csp)
	}
}

// TestScriptsWriteNoMarkupFromData checks that the extension's scripts set
// markup only from string literals: everything that comes from a page, an
// envelope or the relay is set as text (textContent, title), never parsed
// as HTML in the page or in the extension's own pages.
func TestScriptsWriteNoMarkupFromData(t *testing.T) {
	sink := regexp.MustCompile(`\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function|onMessageExternal|onConnectExternal`)
	literals := regexp.MustCompile(`^(\s*'[^'\\\n]*'\s*\+?)+\s*;`)
	files, err := fs.Glob(browser.Files, "ext/*.js")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, name := range files {
		b, err := fs.ReadFile(browser.Files, name)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		for _, loc := range sink.FindAllStringIndex(src, -1) {
			line := strings.Count(src[:loc[0]], "\n") + 1
			what := src[loc[0]:loc[1]]
			if !strings.Contains(what, "innerHTML") || !literals.MatchString(src[loc[1]:]) {
				t.Errorf("%s:%d: %s with something other than string literals", name, line, strings.TrimSpace(what))
			}
		}
	}
}
