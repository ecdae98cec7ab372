package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeOriginal stands in for the original envelope.js: a module around a
// parseEnvelope function, which is all the driver takes from it.
const fakeOriginal = `import chalk from 'chalk'; // never loaded: the driver takes the function alone

function parseEnvelope(text) {
  const start = text.indexOf('body: |\n') + 'body: |\n'.length;
  const end = text.indexOf('\nsig:');
  return { response: text.slice(start, end).split('\n').map((l) => l.slice(2)).join('\n') };
}

console.log(chalk.red('CLI'));
`

func TestRunAgainstOriginal(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node is missing (scripts/deps.sh installs it): %v", err)
		}
		t.Skipf("node is missing: %v", err)
	}
	peer := t.TempDir()
	if err := os.WriteFile(filepath.Join(peer, "envelope.js"), []byte(fakeOriginal), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(config{peer: peer, node: "node", rounds: 1, budget: 5 * time.Millisecond}, &out); err != nil {
		t.Fatalf("run() = %v\n%s", err, out.Bytes())
	}
	got := out.String()
	if strings.Contains(got, "skipping") || strings.Contains(got, "note:") {
		t.Errorf("run() skipped the original or found its bodies differ:\n%s", got)
	}
	for _, in := range []string{"v1.0-small", "v1.1-small", "v1.0-20KB", "v1.1-20KB"} {
		// The tables of times (wall and CPU, for each GOMAXPROCS) and the
		// allocations have a row for it.
		if n, want := strings.Count(got, in), 2*len(procsSettings())+1; n != want {
			t.Errorf("output has %d rows for %s, want %d:\n%s", n, in, want, got)
		}
	}
}

func TestRunWithoutOriginal(t *testing.T) {
	var out bytes.Buffer
	missing := filepath.Join(t.TempDir(), "nowhere")
	if err := run(config{peer: missing, node: "node", rounds: 1, budget: 5 * time.Millisecond}, &out); err != nil {
		t.Fatalf("run() = %v", err)
	}
	if got := out.String(); !strings.Contains(got, "skipping the original parser") || !strings.Contains(got, missing) || !strings.Contains(got, "v1.1-20KB") {
		t.Errorf("run() without the original =\n%s\nwant it to say so, name where it looked, and measure ours", got)
	}
}

func TestInputsParse(t *testing.T) {
	ins, err := inputs()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		small := strings.HasSuffix(in.name, "small")
		if small && (len(in.text) < 1200 || len(in.text) > 1500) || !small && (len(in.text) < 20<<10 || len(in.text) > 21<<10) {
			t.Errorf("%s is %d bytes", in.name, len(in.text))
		}
		for _, p := range goParsers {
			if _, _, err := timeGo(in, p.fn, 1, time.Millisecond); err != nil {
				t.Errorf("%s on %s: %v", p.name, in.name, err)
			}
		}
	}
}

// BenchmarkOurs runs each of our parsers on each of the harness's inputs,
// for profiles of exactly what the command measures:
//
//	go test -run '^$' -bench Ours -benchmem -cpuprofile cpu.out ./internal/bench/parsevsjs
func BenchmarkOurs(b *testing.B) {
	ins, err := inputs()
	if err != nil {
		b.Fatal(err)
	}
	for _, in := range ins {
		for _, p := range goParsers {
			b.Run(in.name+"/"+p.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.fn(in.text); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
