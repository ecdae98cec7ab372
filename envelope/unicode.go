package envelope

import (
	"strconv"
	"unicode"
)

func isLetterOrDigit(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func quote(s string) string { return strconv.Quote(s) }
