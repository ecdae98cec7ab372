package signing

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// decodeB64 decodes any of the four base64 flavours (docs/design.md §4.2): the
// standard or the URL alphabet, with or without padding. Mixing the two
// alphabets, characters outside them (line breaks included, which
// encoding/base64 would skip), wrong padding and non-zero trailing bits are
// errors, so every byte string has exactly one accepted spelling per flavour.
func decodeB64(s string) ([]byte, error) {
	pad := 0
	for pad < 2 && strings.HasSuffix(s[:len(s)-pad], "=") {
		pad++
	}
	body := s[:len(s)-pad]
	if pad > 0 && (len(body)+pad)%4 != 0 {
		return nil, fmt.Errorf("bad base64 padding")
	}
	url, std := false, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' || c == '_':
			url = true
		case c == '+' || c == '/':
			std = true
		default:
			return nil, fmt.Errorf("bad base64 character %q at offset %d", c, i)
		}
	}
	if url && std {
		return nil, fmt.Errorf("base64 mixes the standard and URL alphabets")
	}
	enc := base64.RawURLEncoding
	if std {
		enc = base64.RawStdEncoding
	}
	b, err := enc.Strict().DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("bad base64: %v", err)
	}
	return b, nil
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
