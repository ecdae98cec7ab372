package mail

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	netmail "net/mail"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/text/encoding/htmlindex"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// Limits of the MIME walk: hostile mail cannot make it recurse or loop
// without bound.
const (
	maxPartDepth = 16
	maxParts     = 256
)

// part is one piece of text found in a mail.
type part struct {
	// Path is the IMAP part number ("1", "2.1"); "" for a single-part
	// body.
	Path string
	// Type is the media type it came from ("text/plain").
	Type string
	Text []byte
}

// extraction is what a mail holds.
type extraction struct {
	// Texts are the texts to hand over, in mail order: every text part
	// holding envelope material, or, when none does, all text joined.
	Texts []part
	// Found reports that some text holds an envelope (or the start of
	// one).
	Found bool
	// Notes describe oddities: undecodable parts, unknown charsets, an
	// envelope split across parts.
	Notes []string
}

// extract finds the texts of a raw mail (docs/design.md §5.5, spec "Transport
// Bindings: Email": the envelope is in the body).
//
//   - text/plain parts, in order; in multipart/alternative the
//     text/plain alternative (text/html only when there is none, with its
//     tags stripped); every part of multipart/mixed, /related, /signed;
//     forwarded message/rfc822 mail; attachments named *.crosstalk or
//     *.aict whatever their type;
//   - quoted-printable and base64 transfer encodings; any charset the
//     WHATWG encoding list knows (UTF-8, Latin-1, Windows-1252, …) is
//     converted to UTF-8; format=flowed is unflowed (RFC 3676);
//   - each part stays separate: an envelope is never joined across parts.
//     When one part ends in an unterminated envelope, the Reader reports
//     it as incomplete (the relay rejects it with E-FORMAT), and a note
//     says the envelope looks split.
//
// Quoted replies need nothing here: the envelope Reader strips one level
// of "> " quoting (docs/design.md §3.1).
func extract(raw []byte) extraction {
	var x extraction
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		// Not even a header: offer the bytes as they are.
		x.Notes = append(x.Notes, "unreadable mail header: "+err.Error())
		x.Texts = []part{{Type: "text/plain", Text: raw}}
		x.Found = hasEnvelope(raw)
		return x
	}
	w := walker{}
	w.walk(textproto.MIMEHeader(msg.Header), msg.Body, "", 0, true)
	x.Notes = w.notes
	var withEnv []part
	for _, p := range w.parts {
		if hasEnvelope(p.Text) {
			withEnv = append(withEnv, p)
		}
	}
	if len(withEnv) > 0 {
		x.Texts, x.Found = withEnv, true
		x.Notes = append(x.Notes, splitNotes(w.parts)...)
		return x
	}
	// No envelope anywhere: hand the text over anyway, so the relay
	// records an E-FORMAT notice (nothing is dropped silently).
	var all []byte
	for i, p := range w.parts {
		if i > 0 {
			all = append(all, "\n\n"...)
		}
		all = append(all, p.Text...)
	}
	if len(w.parts) == 0 {
		all = []byte("mail: the mail has no text part (" + strings.Join(w.types, ", ") + ")\n")
	}
	x.Texts = []part{{Type: "text/plain", Text: all}}
	return x
}

// hasEnvelope reports whether text holds an envelope or the start of one.
func hasEnvelope(text []byte) bool {
	_, err := envelope.NewReader(bytes.NewReader(text)).Next()
	return err != io.EOF
}

// incomplete reports whether text ends inside an unterminated envelope.
func incomplete(text []byte) bool {
	r := envelope.NewReader(bytes.NewReader(text))
	last := false
	for {
		e, err := r.Next()
		if err == io.EOF {
			return last
		}
		last = err == nil && !e.Complete
	}
}

var endLine = regexp.MustCompile(`(?m)^(>[ \t]?)?\[\[END\]\][ \t]*\r?$`)

// splitNotes finds a part ending in an unterminated envelope followed by
// a part that has an [[END]] line before any envelope header: an envelope
// split across MIME parts. It is reported, never joined.
func splitNotes(parts []part) []string {
	var notes []string
	for i := 0; i+1 < len(parts); i++ {
		if !incomplete(parts[i].Text) {
			continue
		}
		next := parts[i+1].Text
		if loc := endLine.FindIndex(next); loc != nil && !hasEnvelope(next[:loc[0]]) {
			notes = append(notes, fmt.Sprintf("envelope split across MIME parts %s and %s: not joined; the incomplete envelope is rejected",
				partName(parts[i].Path), partName(parts[i+1].Path)))
		}
	}
	return notes
}

func partName(path string) string {
	if path == "" {
		return "1"
	}
	return path
}

type walker struct {
	parts []part
	notes []string
	types []string
	count int
	full  bool // the note that maxParts was reached is written
}

// tooMany notes, once, that the mail has more than maxParts parts.
func (w *walker) tooMany(path string) {
	if !w.full {
		w.full = true
		w.note(path, "more than %d MIME parts: the rest is ignored", maxParts)
	}
}

func (w *walker) note(path, format string, args ...any) {
	w.notes = append(w.notes, "part "+partName(path)+": "+fmt.Sprintf(format, args...))
}

// walk visits one entity. top is true for the mail itself, whose parts
// number from 1.
func (w *walker) walk(h textproto.MIMEHeader, body io.Reader, path string, depth int, top bool) {
	w.count++
	if w.count > maxParts {
		w.tooMany(path)
		return
	}
	if depth > maxPartDepth {
		w.note(path, "MIME nesting deeper than %d: ignored", maxPartDepth)
		return
	}
	ct := h.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil {
		mt, params = "text/plain", map[string]string{"charset": "us-ascii"} // RFC 2045 §5.2
	}
	w.types = append(w.types, mt)
	switch {
	case strings.HasPrefix(mt, "multipart/"):
		w.multipart(mt, params, body, path, depth, top)
	case mt == "message/rfc822" || mt == "message/global":
		inner, err := netmail.ReadMessage(decodeTransfer(h, body))
		if err != nil {
			w.note(path, "unreadable forwarded mail: %v", err)
			return
		}
		w.walk(textproto.MIMEHeader(inner.Header), inner.Body, path, depth+1, false)
	case mt == "text/plain" || isEnvelopeFile(h, params):
		w.text(h, params, body, path, mt)
	case mt == "text/html":
		// Only used as a last resort (see multipart); a lone HTML body
		// is all there is.
		w.text(h, params, body, path, mt)
	}
}

// isEnvelopeFile reports an attachment named *.crosstalk or *.aict (spec
// "Transport Bindings: File"), whatever its declared type.
func isEnvelopeFile(h textproto.MIMEHeader, params map[string]string) bool {
	name := params["name"]
	if _, dp, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil && dp["filename"] != "" {
		name = dp["filename"]
	}
	name = strings.ToLower(name)
	return strings.HasSuffix(name, ".crosstalk") || strings.HasSuffix(name, ".aict")
}

func (w *walker) multipart(mt string, params map[string]string, body io.Reader, path string, depth int, top bool) {
	boundary := params["boundary"]
	if boundary == "" {
		w.note(path, "%s without boundary: ignored", mt)
		return
	}
	mr := multipart.NewReader(body, boundary)
	type child struct {
		h    textproto.MIMEHeader
		data []byte
		path string
	}
	var children []child
	for i := 1; ; i++ {
		p, err := mr.NextRawPart() // raw: transfer encodings are decoded here, uniformly
		if err == io.EOF {
			break
		}
		if err != nil {
			w.note(path, "broken %s: %v", mt, err)
			break
		}
		if w.count+len(children) >= maxParts {
			// Walked, it would be ignored: not read either. Reading
			// every child first kept an 8 MiB mail of empty parts
			// (each "--b" line one) in some hundreds of MiB.
			w.tooMany(path)
			break
		}
		data, err := io.ReadAll(p)
		if err != nil {
			w.note(path, "broken %s: %v", mt, err)
			break
		}
		cp := strconv.Itoa(i)
		if !top {
			cp = path + "." + cp
		}
		children = append(children, child{p.Header, data, cp})
	}
	if mt == "multipart/alternative" {
		// Prefer text/plain; then anything else that yields text.
		best := -1
		for i, c := range children {
			t, _, _ := mime.ParseMediaType(c.h.Get("Content-Type"))
			if t == "text/plain" || c.h.Get("Content-Type") == "" {
				best = i
				break
			}
		}
		if best < 0 {
			// Walk alternatives in order, keep the first that yields text.
			for _, c := range children {
				n := len(w.parts)
				w.walk(c.h, bytes.NewReader(c.data), c.path, depth+1, false)
				if len(w.parts) > n {
					return
				}
			}
			return
		}
		children = children[best : best+1]
	}
	for _, c := range children {
		w.walk(c.h, bytes.NewReader(c.data), c.path, depth+1, false)
	}
}

// text decodes a text part and keeps it.
func (w *walker) text(h textproto.MIMEHeader, params map[string]string, body io.Reader, path, mt string) {
	data, err := io.ReadAll(decodeTransfer(h, body))
	if err != nil {
		w.note(path, "bad %s transfer encoding: %v (the decodable start is kept)", h.Get("Content-Transfer-Encoding"), err)
	}
	if cs := strings.ToLower(strings.TrimSpace(params["charset"])); cs != "" {
		data, err = toUTF8(data, cs)
		if err != nil {
			w.note(path, "%v: kept as is", err)
		}
	}
	if strings.EqualFold(params["format"], "flowed") {
		data = unflow(data, strings.EqualFold(params["delsp"], "yes"))
	}
	if mt == "text/html" {
		data = htmlText(data)
	}
	w.parts = append(w.parts, part{Path: path, Type: mt, Text: data})
}

// decodeTransfer undoes the Content-Transfer-Encoding.
func decodeTransfer(h textproto.MIMEHeader, body io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))) {
	case "quoted-printable":
		return quotedprintable.NewReader(body)
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, &b64Filter{r: bufio.NewReader(body)})
	}
	return body // 7bit, 8bit, binary, or unknown: as is
}

// b64Filter drops everything that is not base64 alphabet or padding
// (line ends, blanks), as RFC 2045 §6.8 asks of decoders.
type b64Filter struct{ r *bufio.Reader }

func (f *b64Filter) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c, err := f.r.ReadByte()
		if err != nil {
			if n > 0 && errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' {
			p[n] = c
			n++
		}
	}
	return n, nil
}

// toUTF8 converts data from charset to UTF-8.
func toUTF8(data []byte, charset string) ([]byte, error) {
	switch charset {
	case "utf-8", "utf8", "us-ascii", "ascii", "unicode-1-1-utf-8":
		return data, nil
	case "latin1", "l1", "iso_8859-1", "iso8859-1":
		charset = "iso-8859-1"
	}
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return data, fmt.Errorf("unknown charset %q", charset)
	}
	out, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		return data, fmt.Errorf("charset %q: %v", charset, err)
	}
	return out, nil
}

// charsetReader converts RFC 2047 encoded words for mime.WordDecoder.
func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	data, err := io.ReadAll(input)
	if err != nil {
		return nil, err
	}
	out, err := toUTF8(data, strings.ToLower(charset))
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(out), nil
}

// unflow undoes format=flowed (RFC 3676 §4): a line ending in a space is
// joined with the next line of the same quote depth; space-stuffing is
// removed; with delsp=yes the soft-break space is removed too. Quote
// marks are written back as "> " per level, the form the envelope Reader
// strips.
func unflow(data []byte, delsp bool) []byte {
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	var out strings.Builder
	var cur strings.Builder
	curDepth, open := 0, false
	flush := func() {
		if !open {
			return
		}
		out.WriteString(strings.Repeat("> ", curDepth))
		out.WriteString(cur.String())
		out.WriteString("\n")
		cur.Reset()
		open = false
	}
	lines := strings.Split(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for _, line := range lines {
		depth := 0
		for depth < len(line) && line[depth] == '>' {
			depth++
		}
		content := strings.TrimPrefix(line[depth:], " ") // space-stuffing
		if open && depth != curDepth {
			flush() // a depth change ends the paragraph (§4.5)
		}
		soft := strings.HasSuffix(content, " ") && content != "-- "
		if soft && delsp {
			// Drop the soft-break space before writing: removing it
			// from cur afterwards copied the paragraph at every line.
			content = content[:len(content)-1]
		}
		cur.WriteString(content)
		curDepth, open = depth, true
		if soft {
			continue
		}
		flush()
	}
	flush()
	return []byte(out.String())
}

var (
	htmlDrop  = regexp.MustCompile(`(?is)<(script|style|head)\b.*?</(script|style|head)\s*>`)
	htmlPre   = regexp.MustCompile(`(?is)<pre\b[^>]*>.*?</pre\s*>`)
	htmlBreak = regexp.MustCompile(`(?i)<br\s*/?>|</(p|div|pre|tr|li|h[1-6]|blockquote)\s*>`)
	htmlTag   = regexp.MustCompile(`(?s)<[^>]*>`)
	htmlSpace = regexp.MustCompile(`[ \t\r\n]+`)
	// htmlLineEdge is blanks around a line end.
	htmlLineEdge = regexp.MustCompile(` *\n *`)
)

// htmlText is a minimal HTML-to-text conversion for mail that only has an
// HTML body: outside <pre>, source line ends and runs of blanks are
// layout (one space, none at a line's start or end); <br> and block ends
// make line ends; tags are dropped, entities decoded, non-breaking spaces
// made spaces (an "&nbsp; " indent survives).
func htmlText(data []byte) []byte {
	s := htmlDrop.ReplaceAllString(string(data), "")
	var b strings.Builder
	for s != "" {
		loc := htmlPre.FindStringIndex(s)
		if loc == nil {
			loc = []int{len(s), len(s)}
		}
		flow := htmlSpace.ReplaceAllString(s[:loc[0]], " ")
		flow = htmlBreak.ReplaceAllString(flow, "\n")
		flow = htmlTag.ReplaceAllString(flow, "")
		flow = htmlLineEdge.ReplaceAllString(flow, "\n")
		b.WriteString(flow)
		if loc[0] < loc[1] {
			pre := strings.ReplaceAll(s[loc[0]:loc[1]], "\r\n", "\n")
			pre = htmlBreak.ReplaceAllString(pre, "\n")
			b.WriteString("\n")
			b.WriteString(htmlTag.ReplaceAllString(pre, ""))
		}
		s = s[loc[1]:]
	}
	out := html.UnescapeString(b.String())
	return []byte(strings.ReplaceAll(out, "\u00a0", " "))
}
