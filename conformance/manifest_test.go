package conformance_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crosstalk-go/crosstalk/conformance"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

var update = flag.Bool("update", false, "regenerate fixtures/conformance/manifest.json from fixtures/envelope")

// buildManifest makes the manifest from the envelope vectors: one case per
// NAME.txt with NAME.jsonl, and a strict case NAME.strict where
// NAME.strict.jsonl says strict mode differs. Descriptions come from the
// vector table of fixtures/envelope/README.md.
func buildManifest(t *testing.T) []byte {
	t.Helper()
	names, err := fixtures.Envelopes()
	if err != nil {
		t.Fatal(err)
	}
	desc := descriptions(t)
	m := conformance.Manifest{
		Version: 1,
		Spec:    "docs/spec/ai-crosstalk-protocol-v1.1.md, as read by docs/format.md",
		Schema:  "envelope.schema.json",
	}
	for _, name := range names {
		input, err := fixtures.FS.ReadFile("envelope/" + name + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		for _, strict := range []bool{false, true} {
			file, caseName := name+".jsonl", name
			if strict {
				file, caseName = name+".strict.jsonl", name+".strict"
			}
			want, err := fixtures.FS.ReadFile("envelope/" + file)
			if strict && err != nil {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			c := conformance.Case{Name: caseName, Description: desc[name], Strict: strict, Expect: []json.RawMessage{}}
			if utf8.Valid(input) {
				c.Input = string(input)
			} else {
				c.InputBase64 = base64.StdEncoding.EncodeToString(input)
			}
			for _, line := range bytes.Split(want, []byte("\n")) {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				var b bytes.Buffer
				if err := json.Compact(&b, line); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				c.Expect = append(c.Expect, b.Bytes())
			}
			m.Cases = append(m.Cases, c)
		}
	}
	// One case a line, so that a changed vector is a one-line diff.
	var out bytes.Buffer
	cases := m.Cases
	m.Cases = nil
	head, err := marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(bytes.TrimSuffix(head, []byte("null}")))
	out.WriteString("[\n")
	for i, c := range cases {
		b, err := marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		if i < len(cases)-1 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
	}
	out.WriteString("]}\n")
	return out.Bytes()
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

var tableRow = regexp.MustCompile("^\\| `([a-z0-9-]+)` \\| (.*) \\|$")

func descriptions(t *testing.T) map[string]string {
	data, err := fixtures.FS.ReadFile("envelope/README.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if m := tableRow.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = strings.ReplaceAll(m[2], `\|`, "|")
		}
	}
	return out
}

// TestManifestUpToDate keeps manifest.json in step with fixtures/envelope:
// run `go test ./conformance -run TestManifestUpToDate -update` after
// changing a vector.
func TestManifestUpToDate(t *testing.T) {
	want := buildManifest(t)
	path := filepath.Join("..", "fixtures", "conformance", "manifest.json")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./conformance -run TestManifestUpToDate -update", path)
	}
	m, err := conformance.Default()
	if err != nil {
		t.Fatal(err)
	}
	names, _ := fixtures.Envelopes()
	if len(m.Cases) < len(names) {
		t.Errorf("manifest has %d cases for %d vectors", len(m.Cases), len(names))
	}
	for _, c := range m.Cases {
		if c.Description == "" {
			t.Errorf("case %s has no description (add it to the table of fixtures/envelope/README.md)", c.Name)
		}
	}
}

func schema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	data, err := fixtures.Conformance.ReadFile("conformance/envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSchemaAcceptsEveryExpectation validates every expected line of the
// manifest against the JSON Schema, and checks that the schema rejects
// what docs/format.md §11 forbids.
func TestSchemaAcceptsEveryExpectation(t *testing.T) {
	s := schema(t)
	m, err := conformance.Default()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range m.Cases {
		for i, raw := range c.Expect {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(v); err != nil {
				t.Errorf("%s object %d: %v\n%s", c.Name, i+1, err, raw)
			}
			n++
		}
	}
	if n < 200 {
		t.Errorf("validated only %d expected objects", n)
	}
	bad := []string{
		`{}`,
		`{"from":"A","to":"B","version":1,"body":"x","complete":true}`,                                 // no line
		`{"from":"A","to":"B","version":2,"body":"x","complete":true,"line":1}`,                        // version
		`{"from":"A","to":"B","version":1,"body":"x","complete":true,"line":1,"user":""}`,              // absent, not empty
		`{"from":"A","to":"B","version":1,"body":"x","complete":true,"line":1,"meta":[]}`,              // absent, not empty
		`{"from":"A","to":"B","version":1,"body":"x","complete":true,"line":1,"extra":"x"}`,            // unknown key
		`{"from":"A","to":"B","version":1,"body":"x","complete":"yes","line":1}`,                       // type
		`{"error":{"code":"E-NOPE","line":1,"message":"x"}}`,                                           // code
		`{"error":{"code":"E-FORMAT","message":"x"}}`,                                                  // no line
		`{"error":{"code":"E-FORMAT","line":1,"message":"x"},"from":"A"}`,                              // mixed
		`{"from":"A","to":"B","version":1,"body":"x","complete":true,"line":1,"fields":[{"key":"k"}]}`, // no value
	}
	for _, b := range bad {
		var v any
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Fatal(err)
		}
		if s.Validate(v) == nil {
			t.Errorf("schema accepts %s", b)
		}
	}
}
