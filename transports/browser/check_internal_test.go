package browser

import (
	"strings"
	"testing"
)

func TestHeaderBefore(t *testing.T) {
	tests := []struct {
		name string
		text string
		line int
		want int
	}{
		{"unicode arrow", "hi\n[[CLAUDE→CHATGPT v1]]\nintent: ASK\nintent: ASK", 4, 2},
		{"ascii arrow", "[[CLAUDE->CHATGPT v1]]\nx", 2, 1},
		{"fat arrow", "text\n\n[[CLAUDE=>CHATGPT v1]]\nx\ny", 5, 3},
		{"quoted", "> [[CLAUDE→CHATGPT v1]]\n> x", 2, 1},
		{"end is not a header", "[[END]]\nx", 2, 0},
		{"none", "plain\ntext", 2, 0},
		{"later header ignored", "[[A→B v1]]\nx\n[[C→D v1]]", 2, 1},
		{"line past the end", "[[A=>B v1]]", 9, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := headerBefore(strings.Split(tt.text, "\n"), tt.line); got != tt.want {
				t.Errorf("headerBefore(line %d) = %d, want %d", tt.line, got, tt.want)
			}
		})
	}
}
