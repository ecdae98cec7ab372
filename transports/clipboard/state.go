package clipboard

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Kinds of remembered hashes.
const (
	kindOwn  = "own"  // placed on the clipboard by Write/Send
	kindSeen = "seen" // handed to a Handler that returned nil
)

// keep is how many hashes are remembered; the state file is compacted to
// this many lines when it has grown to twice as many.
const keep = 256

// hashText is the identity of a clipboard text: the SHA-256 of its bytes
// without trailing white space (some tools add a newline).
func hashText(text []byte) string {
	sum := sha256.Sum256(bytes.TrimRight(text, " \t\r\n"))
	return hex.EncodeToString(sum[:])
}

// state remembers recent hashes in memory and, when file is set, in a file
// shared with other processes. Lines are "own <hex>" or "seen <hex>";
// appends are single small writes with O_APPEND, atomic on local file
// systems.
type state struct {
	file string

	mu  sync.Mutex
	mem []string // "kind hex", oldest first
}

func newState(file string) *state { return &state{file: file} }

// add remembers sum as kind.
func (s *state) add(kind, sum string) error {
	line := kind + " " + sum
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mem = append(s.mem, line)
	if len(s.mem) > keep {
		s.mem = append([]string(nil), s.mem[len(s.mem)-keep:]...)
	}
	if s.file == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.file), 0o700); err != nil {
		return fmt.Errorf("clipboard: state file: %w", err)
	}
	f, err := os.OpenFile(s.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("clipboard: state file: %w", err)
	}
	_, err = f.WriteString(line + "\n")
	fi, serr := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("clipboard: state file %s: %w", s.file, err)
	}
	if serr == nil && fi.Size() > 2*keep*int64(len(line)+1) {
		return s.compact()
	}
	return nil
}

// compact rewrites the state file with its last keep lines. An append by
// another process during the rewrite may be lost: at worst one text is
// offered twice, which the relay's de-duplication absorbs.
func (s *state) compact() error {
	lines, err := s.read()
	if err != nil {
		return err
	}
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.file), "."+filepath.Base(s.file)+".tmp-*")
	if err != nil {
		return fmt.Errorf("clipboard: state file: %w", err)
	}
	_, err = tmp.WriteString(strings.Join(lines, "\n") + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("clipboard: state file: %w", err)
	}
	return nil
}

// read returns the state file's lines; none when it does not exist.
func (s *state) read() ([]string, error) {
	b, err := os.ReadFile(s.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("clipboard: state file: %w", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// has reports whether sum is remembered, and as which kind ("" when not;
// kindOwn wins over kindSeen).
func (s *state) has(sum string) (string, error) {
	s.mu.Lock()
	mem := append([]string(nil), s.mem...)
	s.mu.Unlock()
	var lines []string
	var err error
	if s.file != "" {
		lines, err = s.read()
	}
	found := ""
	for _, l := range append(lines, mem...) {
		kind, h, _ := strings.Cut(l, " ")
		if h != sum {
			continue
		}
		if kind == kindOwn {
			return kindOwn, err
		}
		found = kind
	}
	return found, err
}
