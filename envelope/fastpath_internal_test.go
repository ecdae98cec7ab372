package envelope

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// The Reader's fast paths (session 12) must answer exactly what the plain
// code they replaced answered. Each ref* below is that plain code, kept
// as the specification the fast path is checked against.

// refIsULID is isULID as a loop over the alphabet.
func refIsULID(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(crockford, rune(s[i])) && !strings.ContainsRune(strings.ToLower(crockford), rune(s[i])) {
			return false
		}
	}
	return true
}

// TestIsULIDEveryByte changes each digit of a ULID to each byte value,
// and tries every length around 26.
func TestIsULIDEveryByte(t *testing.T) {
	const id = "01J9J3DCZ5P8Q2R4S6T8V0W1X3"
	for i := 0; i < len(id); i++ {
		for c := 0; c < 256; c++ {
			s := id[:i] + string([]byte{byte(c)}) + id[i+1:]
			if got, want := isULID(s), refIsULID(s); got != want {
				t.Fatalf("isULID(%q) = %v, want %v", s, got, want)
			}
			if got, want := isULID([]byte(s)), refIsULID(s); got != want {
				t.Fatalf("isULID([]byte(%q)) = %v, want %v", s, got, want)
			}
		}
	}
	for n := 0; n < 40; n++ {
		s := strings.Repeat("0", n)
		if got, want := isULID(s), refIsULID(s); got != want {
			t.Fatalf("isULID(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzIsULID compares isULID with refIsULID.
func FuzzIsULID(f *testing.F) {
	f.Add("01J9J3DCZ5P8Q2R4S6T8V0W1X3")
	f.Add("01j9j3dcz5p8q2r4s6t8v0w1x3")
	f.Add("81J9J3DCZ5P8Q2R4S6T8V0W1X3")
	f.Add("01J9J3DCZ5P8Q2R4S6T8V0W1XU")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isULID(s), refIsULID(s); got != want {
			t.Fatalf("isULID(%q) = %v, want %v", s, got, want)
		}
		if got, want := isULID([]byte(s)), refIsULID(s); got != want {
			t.Fatalf("isULID([]byte(%q)) = %v, want %v", s, got, want)
		}
	})
}

// TestPrintableASCIIEveryByte: printableASCII is true exactly for the
// strings NormalizeIdentifier's own ASCII loop returns at once.
func TestPrintableASCIIEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		s := "ab" + string([]byte{byte(c)}) + "cd"
		want := c >= 0x20 && c < 0x7f
		if got := printableASCII(s); got != want {
			t.Errorf("printableASCII(%q) = %v, want %v", s, got, want)
		}
	}
	if !printableASCII("") {
		t.Error(`printableASCII("") = false`)
	}
}

// TestNormalizeIdentifiersFastPath: one identifier that is not printable
// ASCII, whichever it is and whatever its byte, takes NormalizeIdentifiers
// off its fast path to the answer NormalizeIdentifier gives.
func TestNormalizeIdentifiersFastPath(t *testing.T) {
	for _, bad := range []string{"\x7f", "\x1f", "\u200b", "e\u0301"} {
		for i := 0; i < 5; i++ {
			e := &Envelope{From: "CLAUDE", To: "GEMINI", Context: "proj", Line: 1,
				Meta: []Meta{{Namespace: "routing"}, {Namespace: "privacy"}}}
			p := [...]*string{&e.From, &e.To, &e.Context, &e.Meta[0].Namespace, &e.Meta[1].Namespace}[i]
			*p += bad
			want, wantErr := NormalizeIdentifier(*p)
			err := e.NormalizeIdentifiers()
			if (err != nil) != (wantErr != nil) || err == nil && *p != want {
				t.Errorf("identifier %d with %+q: NormalizeIdentifiers() = %v, value %+q; NormalizeIdentifier gives %+q, %v", i, bad, err, *p, want, wantErr)
			}
		}
	}
}

// refNormalizeIntent is NormalizeIntent without its exact-match shortcut.
func refNormalizeIntent(s string) (intent, legacy string, known bool) {
	u := strings.ToUpper(s)
	for _, k := range Intents {
		if u == k {
			return k, "", true
		}
	}
	if m, ok := legacyIntents[u]; ok {
		return m, s, true
	}
	return s, "", false
}

// TestNormalizeIntentShortcut compares NormalizeIntent with
// refNormalizeIntent on every intent in every case, and registryIntent
// knows every intent of the registry.
func TestNormalizeIntentShortcut(t *testing.T) {
	var in []string
	for _, k := range Intents {
		if registryIntent(k) != k {
			t.Errorf("registryIntent(%q) = %q", k, registryIntent(k))
		}
		in = append(in, k, strings.ToLower(k), k[:1]+strings.ToLower(k[1:]), k+" ", k[:len(k)-1])
	}
	for k := range legacyIntents {
		in = append(in, k, strings.ToLower(k))
	}
	in = append(in, "", "FOO", "reQuest")
	for _, s := range in {
		i1, l1, k1 := NormalizeIntent(s)
		i2, l2, k2 := refNormalizeIntent(s)
		if i1 != i2 || l1 != l2 || k1 != k2 {
			t.Errorf("NormalizeIntent(%q) = %q, %q, %v; want %q, %q, %v", s, i1, l1, k1, i2, l2, k2)
		}
	}
}

func refIsAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// refTopField is topField with the key's characters tested by range.
func refTopField(c []byte) (key, val []byte, ok bool) {
	if len(c) == 0 || c[0] < 'a' || c[0] > 'z' {
		return nil, nil, false
	}
	i := 1
	for i < len(c) && (c[i] >= 'a' && c[i] <= 'z' || c[i] >= '0' && c[i] <= '9' || c[i] == '_' || c[i] == '-') {
		i++
	}
	return refSplitAt(c, i)
}

// refMetaField is metaField with the key's characters tested by range.
func refMetaField(c []byte) (key, val []byte, ok bool) {
	i := 0
	for i < len(c) && (refIsAlnum(c[i]) || i > 0 && (c[i] == '_' || c[i] == '.' || c[i] == '-')) {
		i++
	}
	if i == 0 {
		return nil, nil, false
	}
	return refSplitAt(c, i)
}

// refSplitAt is the key and trimmed value of a field line whose key ends
// at c[i].
func refSplitAt(c []byte, i int) (key, val []byte, ok bool) {
	if i >= len(c) || c[i] != ':' {
		return nil, nil, false
	}
	if i+1 < len(c) && c[i+1] != ' ' && c[i+1] != '\t' {
		return nil, nil, false
	}
	return c[:i], trimBlanks(c[i+1:]), true
}

// checkFieldSplit compares topField and metaField with their references
// on line.
func checkFieldSplit(t *testing.T, line []byte) {
	t.Helper()
	for _, f := range []struct {
		name      string
		got, want func([]byte) ([]byte, []byte, bool)
	}{{"topField", topField, refTopField}, {"metaField", metaField, refMetaField}} {
		k1, v1, ok1 := f.got(line)
		k2, v2, ok2 := f.want(line)
		if ok1 != ok2 || string(k1) != string(k2) || string(v1) != string(v2) || len(k1) != len(k2) {
			t.Fatalf("%s(%q) = %q, %q, %v; want %q, %q, %v", f.name, line, k1, v1, ok1, k2, v2, ok2)
		}
	}
}

// TestFieldSplitEveryByte puts each byte value at each position of a
// top-level and a META line.
func TestFieldSplitEveryByte(t *testing.T) {
	for _, line := range []string{"context: deploy-status", "X-Reply_To.2: claude://x", "a: b", "k:"} {
		for i := 0; i <= len(line); i++ {
			for c := 0; c < 256; c++ {
				b := []byte(line[:i] + string([]byte{byte(c)}) + line[i:])
				checkFieldSplit(t, b)
				b[i] = byte(c)
				checkFieldSplit(t, b[:i+1])
			}
		}
	}
	checkFieldSplit(t, nil)
}

// FuzzFieldSplit compares topField and metaField with their references.
func FuzzFieldSplit(f *testing.F) {
	for _, s := range []string{"context: deploy-status", "X-Route: a → b", "meta: routing", "sig:none", "_x: y", "9k: v"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkFieldSplit(t, line) })
}

// checkValidUTF8 compares validUTF8 with utf8.Valid on b.
func checkValidUTF8(t *testing.T, b []byte) {
	t.Helper()
	if got, want := validUTF8(b), utf8.Valid(b); got != want {
		t.Fatalf("validUTF8(%q) = %v, want %v", b, got, want)
	}
}

// TestValidUTF8 puts every byte, followed by continuation bytes at the
// edges of the ranges UTF-8 allows, at offsets of ASCII runs that end a
// 64-byte window, an 8-byte step and the tail before and after it; and
// long ASCII with a bad byte at each position.
func TestValidUTF8(t *testing.T) {
	ascii := strings.Repeat("The deploy pipeline is green again. ", 3)
	edges := []byte{0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}
	var seqs [][]byte
	for a := 0; a < 256; a++ {
		seqs = append(seqs, []byte{byte(a)})
		for _, b := range edges {
			seqs = append(seqs, []byte{byte(a), b})
			if a >= 0xe0 {
				for _, c := range []byte{0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xff} {
					seqs = append(seqs, []byte{byte(a), b, c}, []byte{byte(a), b, c, 0x80}, []byte{byte(a), b, c, 0xbf})
				}
			}
		}
	}
	for _, seq := range seqs {
		for _, pre := range []int{0, 7, 8, 31, 56, 63, 64} {
			for _, post := range []int{0, 1, 8} {
				b := append(append([]byte(ascii[:pre]), seq...), ascii[:post]...)
				checkValidUTF8(t, b)
			}
		}
	}
	for _, r := range []rune{0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xd800, 0xdfff, 0xe000, 0xfffd, 0xffff, 0x10000, 0x10ffff} {
		for pre := 0; pre < 72; pre++ {
			checkValidUTF8(t, []byte(ascii[:pre]+string(r)+ascii[:pre%9]+"→"))
		}
	}
	long := []byte(strings.Repeat(ascii, 4))
	for i := range long {
		for _, c := range []byte{0x80, 0xc3, 0xe2, 0xff} {
			b := append([]byte(nil), long...)
			b[i] = c
			checkValidUTF8(t, b)
		}
	}
}

// FuzzValidUTF8 compares validUTF8 with utf8.Valid.
func FuzzValidUTF8(f *testing.F) {
	f.Add([]byte("[[CLAUDE→CHATGPT v1]]\nuser: kalle\nX-Route: claude://session/abc → chatgpt://thread/xyz\n"))
	f.Add([]byte("\xed\xa0\x80 surrogate, \xf4\x90\x80\x80 above U+10FFFF, \xc0\xaf overlong"))
	f.Add([]byte(strings.Repeat("a", 40) + "\xe2\x86"))
	f.Fuzz(func(t *testing.T, b []byte) { checkValidUTF8(t, b) })
}

// TestTrimSpaceEdges puts every byte, and Unicode spaces, at either end of
// an address.
func TestTrimSpaceEdges(t *testing.T) {
	var edges []string
	for c := 0; c < 256; c++ {
		edges = append(edges, string([]byte{byte(c)}))
	}
	edges = append(edges, "\u0085", "\u00a0", "\u2000", "\u202f", "\u3000", "\u200b", "")
	for _, e := range edges {
		for _, s := range []string{e + "CLAUDE", "CLAUDE" + e, e + "C" + e, e} {
			if got, want := trimSpace([]byte(s)), bytes.TrimSpace([]byte(s)); string(got) != string(want) {
				t.Errorf("trimSpace(%q) = %q, want %q", s, got, want)
			}
		}
	}
}
