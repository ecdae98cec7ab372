package envelope

import (
	"bytes"
	"io"
	"sync"
)

// lineScanner splits input into lines at LF, CRLF or a lone CR (DESIGN §3.1:
// chat UIs and clipboards on other systems produce all three). It never holds
// more than maxLine bytes of one line: the rest of a longer line is read and
// thrown away, and the line is reported as too long. Memory is therefore
// bounded by the line limit, not by the input.
type lineScanner struct {
	r       io.Reader
	buf     []byte
	start   int // first unread byte in buf
	end     int // end of valid data in buf
	maxLine int
	line    int  // number of the line last returned
	skipLF  bool // the last line ended in CR: a following LF belongs to it
	eof     bool
	err     error // first read error other than io.EOF
}

// initialBuffer is the scanner's first buffer size; it grows (doubling)
// only for longer lines, up to maxLine+1, so parsing one small envelope
// does not pay for a 64 KiB buffer.
const initialBuffer = 4 << 10

// bufPool recycles initial buffers between Readers (an HTTP handler makes
// one Reader per request).
var bufPool = sync.Pool{New: func() any { b := make([]byte, initialBuffer); return &b }}

func newLineScanner(r io.Reader, maxLine int) *lineScanner {
	s := &lineScanner{r: r, maxLine: maxLine}
	if maxLine+1 >= initialBuffer {
		s.buf = *bufPool.Get().(*[]byte)
	} else {
		s.buf = make([]byte, maxLine+1)
	}
	return s
}

// release returns the buffer to the pool at the end of the input.
func (s *lineScanner) release() {
	if len(s.buf) == initialBuffer {
		b := s.buf
		bufPool.Put(&b)
	}
	s.buf = nil
	s.start, s.end = 0, 0
}

// sizeHint guesses the size of the envelope whose header was just read:
// the distance to the next "[[END]]" in what is buffered, or 1 KiB.
func (s *lineScanner) sizeHint() int {
	if i := bytes.Index(s.buf[s.start:s.end], []byte("[[END]]")); i >= 0 {
		return i + 16
	}
	return 1 << 10
}

// fill reads more input after moving unread bytes to the front, growing
// the buffer when it is full of one unfinished line.
func (s *lineScanner) fill() {
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) && len(s.buf) < s.maxLine+1 {
		nb := make([]byte, min(2*len(s.buf), s.maxLine+1))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for s.end < len(s.buf) && !s.eof {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			s.err, s.eof = err, true
		}
		if n > 0 {
			return
		}
	}
}

// next returns the next line without its terminator. The slice is valid
// until the following call. long reports a line over maxLine bytes; its
// content is then nil. ok is false at the end of input.
func (s *lineScanner) next() (line []byte, long, ok bool) {
	if s.skipLF {
		if s.start == s.end {
			s.fill()
		}
		if s.start < s.end && s.buf[s.start] == '\n' {
			s.start++
		}
		s.skipLF = false
	}
	discarding := false
	for {
		seg := s.buf[s.start:s.end]
		i := bytes.IndexByte(seg, '\n')
		if i < 0 {
			i = bytes.IndexByte(seg, '\r')
		} else if j := bytes.IndexByte(seg[:i], '\r'); j >= 0 {
			i = j
		}
		if i >= 0 {
			s.line++
			if seg[i] == '\r' {
				s.skipLF = true
			}
			s.start += i + 1
			if discarding || i > s.maxLine {
				return nil, true, true
			}
			return seg[:i], false, true
		}
		if s.eof {
			if s.start == s.end {
				if discarding {
					s.line++
					return nil, true, true
				}
				return nil, false, false
			}
			s.line++
			s.start = s.end
			if discarding || len(seg) > s.maxLine {
				return nil, true, true
			}
			return seg, false, true
		}
		if len(seg) > s.maxLine {
			// Too long to be a line we keep: drop what we have and
			// look for the end of the line in what follows.
			discarding = true
			s.start = s.end
		}
		s.fill()
	}
}
