package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/conformance"
	"github.com/crosstalk-go/crosstalk/envelope"
)

// asParser makes the test binary, run by the conformance kit, act as the
// parser named (see TestMain). Under -race a child would sleep a second at
// exit (the race runtime's atexit_sleep_ms): the kit runs it hundreds of
// times, so the children are told not to.
func asParser(t *testing.T, name string) {
	t.Setenv("CROSSTALK_TEST_AS", name)
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// TestMain lets the test binary stand in for a parser under test:
// CROSSTALK_TEST_AS=crosstalk runs the crosstalk command line,
// CROSSTALK_TEST_AS=broken-parser a deliberately broken parser.
func TestMain(m *testing.M) {
	switch os.Getenv("CROSSTALK_TEST_AS") {
	case "crosstalk":
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case "broken-parser":
		os.Exit(brokenParser(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// brokenParser is a plausible but wrong parser: it reports error lines one
// too far and forgets legacy_intent.
func brokenParser(in io.Reader, out io.Writer) int {
	r := envelope.NewReader(in)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		e, err := r.Next()
		var se *envelope.SyntaxError
		switch {
		case err == io.EOF:
			return 0
		case errors.As(err, &se):
			var je jsonError
			je.Error.Code, je.Error.Line, je.Error.Message = se.Code, se.Line+1, se.Msg
			enc.Encode(je)
		case err != nil:
			return 1
		default:
			e.LegacyIntent = ""
			enc.Encode(e)
		}
	}
}

// row reports whether out has a table row with that result for the case
// (any case when name is "").
func row(out, result, name string) bool {
	pat := `(?m)^` + result + ` +\S+`
	if name != "" {
		pat = `(?m)^` + result + ` +` + regexp.QuoteMeta(name) + `( |$)`
	}
	return regexp.MustCompile(pat).MatchString(out)
}

var summaryLine = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed\n\z`)

// TestConformanceOwnParser runs the conformance kit against
// `crosstalk parse --json`: every case passes.
func TestConformanceOwnParser(t *testing.T) {
	asParser(t, "crosstalk")
	out, stderr, code := runCLI(t, "", "conformance", "--strict-arg", "--strict", "--", os.Args[0], "parse", "--json")
	m := summaryLine.FindStringSubmatch(out)
	if code != 0 || m == nil || m[2] != "0" || row(out, "FAIL", "") || row(out, "skip", "") {
		t.Fatalf("conformance = exit %d\n%s\n%s", code, out, stderr)
	}
	if m[1] == "0" || !row(out, "pass", "legacy-question") || !row(out, "pass", "end-missing-eof.strict") {
		t.Errorf("conformance ran too little:\n%s", out)
	}
	// Without --strict-arg the strict cases are skipped, not failed
	// (two cases of the manifest, a lenient one and a strict one).
	man, err := conformance.Default()
	if err != nil {
		t.Fatal(err)
	}
	var two []conformance.Case
	for _, c := range man.Cases {
		if c.Name == "end-missing-eof" || c.Name == "end-missing-eof.strict" {
			two = append(two, c)
		}
	}
	man.Cases = two
	data, _ := json.Marshal(man)
	path := t.TempDir() + "/two.json"
	os.WriteFile(path, data, 0o600)
	out, _, code = runCLI(t, "", "conformance", "--manifest", path, os.Args[0], "parse", "--json")
	if code != 0 || !row(out, "pass", "end-missing-eof") || !row(out, "skip", "end-missing-eof.strict") || !strings.HasSuffix(out, "1 skipped (strict cases; give --strict-arg)\n1 passed, 0 failed\n") {
		t.Errorf("conformance without --strict-arg = exit %d\n%s", code, out)
	}
}

// TestConformanceBrokenParser checks that a wrong parser fails loudly:
// exit 1, FAIL rows that say what differed, and a count of failures.
func TestConformanceBrokenParser(t *testing.T) {
	asParser(t, "broken-parser")
	out, _, code := runCLI(t, "", "conformance", "--failures", "--", os.Args[0])
	m := summaryLine.FindStringSubmatch(out)
	if code != 1 || m == nil || m[2] == "0" {
		t.Fatalf("conformance of a broken parser = exit %d\n%s", code, out)
	}
	if !row(out, "FAIL", "err-duplicate-intent") || !row(out, "FAIL", "legacy-question") {
		t.Errorf("output lacks FAIL rows:\n%s", out)
	}
	for _, want := range []string{"want error E-FORMAT at line 5, got E-FORMAT at line 6", `key "legacy_intent" missing, want "QUESTION"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if row(out, "pass", "") {
		t.Errorf("--failures printed passing rows")
	}
}

func TestConformanceUsage(t *testing.T) {
	if _, _, code := runCLI(t, "", "conformance"); code != 2 {
		t.Errorf("conformance without CMD = exit %d, want 2", code)
	}
	if _, stderr, code := runCLI(t, "", "conformance", "--", "/nonexistent/parser"); code != 1 || !strings.Contains(stderr, "cannot run") {
		t.Errorf("conformance of a missing CMD = exit %d, %s", code, stderr)
	}
	bad := t.TempDir() + "/m.json"
	os.WriteFile(bad, []byte(`{"version":1,"cases":[]}`), 0o600)
	if _, stderr, code := runCLI(t, "", "conformance", "--manifest", bad, "true"); code != 1 || !strings.Contains(stderr, "no cases") {
		t.Errorf("conformance with an empty manifest = exit %d, %s", code, stderr)
	}
}
