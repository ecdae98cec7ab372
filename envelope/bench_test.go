package envelope_test

import (
	"bytes"
	"io"
	"net/mail"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// benchBody is ~1 KiB of prose, the size of a typical assistant message.
var benchBody = strings.Repeat("The deploy pipeline is green again; the flaky test was a race in the cache warm-up.\n", 12)

// benchEnvelope is a realistic envelope: v1.1 ids, two META blocks, ~1 KiB body.
var benchEnvelope = func() []byte {
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, strings.TrimSuffix(benchBody, "\n"))
	e.User, e.Session, e.Context = "kalle", "2025-10-09T16Z abc123", "deploy-status"
	e.Meta = []envelope.Meta{
		{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Route", Value: "claude://session/abc → chatgpt://thread/xyz"}, {Key: "X-Reply-To", Value: "claude://session/abc"}, {Key: "X-Priority", Value: "high"}}},
		{Namespace: "privacy", Fields: []envelope.Field{{Key: "PII", Value: "redacted"}, {Key: "Consent", Value: "explicit_yes_2025-10-09T16:00Z"}, {Key: "Scope", Value: "general"}}},
	}
	b, err := envelope.Marshal(e)
	if err != nil {
		panic(err)
	}
	return b
}()

// benchMail is an RFC 5322 message of the same size and shape: the same
// header fields as headers, the same body.
var benchMail = func() []byte {
	var b bytes.Buffer
	b.WriteString("From: CLAUDE <claude@example.com>\r\nTo: CHATGPT <chatgpt@example.com>\r\n")
	b.WriteString("Subject: [AI Crosstalk] deploy-status - REQUEST\r\nDate: Thu, 09 Oct 2025 16:00:00 +0000\r\n")
	b.WriteString("Message-ID: <01J9J3DBC4N7P2Q3R5S7T9V1V2@example.com>\r\nIn-Reply-To: <01J9J3D9C2V8M4P1R6S8T9V0V1@example.com>\r\n")
	b.WriteString("X-Route: claude://session/abc -> chatgpt://thread/xyz\r\nX-Reply-To: claude://session/abc\r\nX-Priority: high\r\n")
	b.WriteString("X-PII: redacted\r\nX-Consent: explicit_yes_2025-10-09T16:00Z\r\nX-Scope: general\r\n\r\n")
	b.WriteString(strings.ReplaceAll(benchBody, "\n", "\r\n"))
	for b.Len() < len(benchEnvelope) {
		b.WriteString("x")
	}
	return b.Bytes()
}()

// BenchmarkParse compares reading one envelope with envelope.Reader against
// reading a same-size mail with net/mail (headers parsed, body read), in
// the same run. The goal (issue 2) is envelope/netmail ≤ 1.0.
func BenchmarkParse(b *testing.B) {
	b.Run("envelope", func(b *testing.B) {
		b.SetBytes(int64(len(benchEnvelope)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			r := envelope.NewReader(bytes.NewReader(benchEnvelope))
			e, err := r.Next()
			if err != nil || len(e.Body) < 900 {
				b.Fatal(err)
			}
			if _, err := r.Next(); err != io.EOF { // read to the end, as a caller does
				b.Fatal(err)
			}
		}
	})
	b.Run("netmail", func(b *testing.B) {
		b.SetBytes(int64(len(benchMail)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			m, err := mail.ReadMessage(bytes.NewReader(benchMail))
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(m.Body)
			if err != nil || len(body) < 900 || m.Header.Get("X-Priority") != "high" {
				b.Fatal(err)
			}
		}
	})
}

// readMail is the net/mail baseline: parse a same-size message's headers
// and read its body to the end.
func readMail(b *testing.B) {
	m, err := mail.ReadMessage(bytes.NewReader(benchMail))
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(m.Body)
	if err != nil || len(body) < 900 || m.Header.Get("X-Priority") != "high" {
		b.Fatal(err)
	}
}

// ratioBench runs ours and base in turns, blocks of 32 calls each, so that
// load from other processes weighs on both alike, and reports both times
// and ours/base as "ratio" (issue 19: the goal is ≤ 1.0 against net/mail).
func ratioBench(b *testing.B, ours, base func(*testing.B)) {
	const block = 32
	b.ReportAllocs()
	var oursNS, baseNS time.Duration
	n := 0
	for b.Loop() {
		// b.Loop counts iterations; each one runs a block of both.
		t0 := time.Now()
		for range block {
			ours(b)
		}
		t1 := time.Now()
		for range block {
			base(b)
		}
		oursNS += t1.Sub(t0)
		baseNS += time.Since(t1)
		n += block
	}
	b.ReportMetric(float64(oursNS.Nanoseconds())/float64(n), "ours-ns")
	b.ReportMetric(float64(baseNS.Nanoseconds())/float64(n), "netmail-ns")
	b.ReportMetric(float64(oursNS)/float64(baseNS), "ratio")
}

// BenchmarkNextOnce is the way `crosstalk parse`, an HTTP request or a
// folder file meets the parser: a fresh Reader, one call to Next, and the
// Reader dropped without reading to the end. The baseline is net/mail on a
// same-size message in the same loop; allocs/op count both.
func BenchmarkNextOnce(b *testing.B) {
	ratioBench(b, func(b *testing.B) {
		e, err := envelope.NewReader(bytes.NewReader(benchEnvelope)).Next()
		if err != nil || len(e.Body) < 900 {
			b.Fatal(err)
		}
	}, readMail)
}

// BenchmarkNextOnceBytes is BenchmarkNextOnce with a Reader over the bytes
// the caller already has (NewBytesReader), as the relay and Unmarshal do.
func BenchmarkNextOnceBytes(b *testing.B) {
	ratioBench(b, func(b *testing.B) {
		e, err := envelope.NewBytesReader(benchEnvelope).Next()
		if err != nil || len(e.Body) < 900 {
			b.Fatal(err)
		}
	}, readMail)
}

// BenchmarkDrain reads the envelope and then the end of the input with a
// fresh Reader, against net/mail in the same loop.
func BenchmarkDrain(b *testing.B) {
	ratioBench(b, func(b *testing.B) {
		r := envelope.NewReader(bytes.NewReader(benchEnvelope))
		e, err := r.Next()
		if err != nil || len(e.Body) < 900 {
			b.Fatal(err)
		}
		if _, err := r.Next(); err != io.EOF {
			b.Fatal(err)
		}
	}, readMail)
}

// BenchmarkUnmarshal is Unmarshal of the same envelope against net/mail.
func BenchmarkUnmarshal(b *testing.B) {
	ratioBench(b, func(b *testing.B) {
		e, err := envelope.Unmarshal(benchEnvelope)
		if err != nil || len(e.Body) < 900 {
			b.Fatal(err)
		}
	}, readMail)
}

// transcript is an endless noisy chat transcript: prose, markdown, fenced
// and quoted envelopes, CRLF sections.
type transcript struct {
	chunk []byte
	off   int
	left  int64
}

func newTranscript(size int64) *transcript {
	var c bytes.Buffer
	for i := 0; i < 4; i++ {
		c.WriteString("User: can you pass this to the other assistant?\n\nAssistant: Sure — here is the envelope:\n\n```text\n")
		c.Write(benchEnvelope)
		c.WriteString("```\n\nLet me know when it answers. Some **markdown** and a list:\n- one\n- two\n\n")
		for _, l := range strings.SplitAfter(string(benchEnvelope), "\n") {
			if l != "" {
				c.WriteString("> " + l)
			}
		}
		c.WriteString(strings.Repeat("chat noise without any envelope in it at all, just words. ", 20) + "\r\n")
	}
	return &transcript{chunk: c.Bytes(), left: size}
}

func (t *transcript) Read(p []byte) (int, error) {
	if t.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n := 0
	for n < len(p) {
		k := copy(p[n:], t.chunk[t.off:])
		n += k
		t.off = (t.off + k) % len(t.chunk)
	}
	t.left -= int64(n)
	return n, nil
}

// BenchmarkStream reads a 64 MiB noisy transcript per iteration and reports
// throughput, the largest heap seen and the process's peak RSS. Run it with
// -benchtime=16x for the 1 GiB figure in docs/performance.md; the heap must
// stay flat however long it runs.
func BenchmarkStream(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	var peakHeap uint64
	var ms runtime.MemStats
	n := 0
	for i := 0; i < b.N; i++ {
		r := envelope.NewReader(newTranscript(size))
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
			if n%20000 == 0 {
				runtime.ReadMemStats(&ms)
				peakHeap = max(peakHeap, ms.HeapInuse)
			}
		}
	}
	if mib, ok := peakRSSMiB(); ok {
		b.ReportMetric(mib, "peak-RSS-MiB")
	}
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(n)/float64(b.N), "envelopes/op")
}
