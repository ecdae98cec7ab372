package main

import (
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

// TestAgentInjectionKeys: the [[agents]] keys buffer, buffer_quiet,
// buffer_max and digest_every reach the address book, and windows that
// cannot work are refused by Validate.
func TestAgentInjectionKeys(t *testing.T) {
	cfg, err := decodeConfig("test.toml", []byte(`
[[agents]]
id = "claude"
buffer_quiet = "2s"
digest_every = "15m"
[[agents]]
id = "chatgpt"
buffer = true
[[agents]]
id = "gemini"
`))
	if err != nil {
		t.Fatal(err)
	}
	book, err := cfg.book()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id     string
		buffer *attention.Buffer
		digest time.Duration
	}{
		{"claude", &attention.Buffer{Quiet: 2 * time.Second}, 15 * time.Minute},
		{"chatgpt", &attention.Buffer{}, 0},
		{"gemini", nil, 0},
	} {
		a, _ := book.Agent(tc.id)
		if (a.Buffer == nil) != (tc.buffer == nil) || a.Buffer != nil && *a.Buffer != *tc.buffer || a.DigestEvery != tc.digest {
			t.Errorf("%s: buffer %+v, digest %s; want %+v, %s", tc.id, a.Buffer, a.DigestEvery, tc.buffer, tc.digest)
		}
	}
	for _, bad := range []string{
		"[[agents]]\nid = \"a\"\ndigest_every = \"10s\"\n",
		"[[agents]]\nid = \"a\"\nbuffer_quiet = \"1m\"\nbuffer_max = \"10s\"\n",
		"[[agents]]\nid = \"a\"\nbuffer_max = \"1h\"\n",
	} {
		cfg, err := decodeConfig("bad.toml", []byte(bad))
		if err == nil {
			_, err = cfg.book()
		}
		if err == nil {
			t.Errorf("config %q accepted", bad)
		}
	}
}
