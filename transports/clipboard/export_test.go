package clipboard

import (
	"testing"
	"time"
)

// SetReadTimeout sets how long a clipboard tool may take to answer, for
// the rest of the test.
func SetReadTimeout(t *testing.T, d time.Duration) {
	old := readTimeout
	readTimeout = d
	t.Cleanup(func() { readTimeout = old })
}
