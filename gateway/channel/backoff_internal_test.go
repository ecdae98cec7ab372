package channel

import (
	"testing"
	"time"
)

func TestAckWait(t *testing.T) {
	tests := []struct {
		first, limit time.Duration
		attempt      int
		want         time.Duration
	}{
		{time.Second, time.Minute, 1, time.Second},
		{time.Second, time.Minute, 2, 2 * time.Second},
		{time.Second, time.Minute, 3, 4 * time.Second},
		{time.Second, 5 * time.Second, 4, 5 * time.Second},
		{time.Second, 5 * time.Second, 1000, 5 * time.Second},
		{10 * time.Second, 5 * time.Second, 1, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := ackWait(tt.first, tt.limit, tt.attempt); got != tt.want {
			t.Errorf("ackWait(%v, %v, %d) = %v, want %v", tt.first, tt.limit, tt.attempt, got, tt.want)
		}
	}
}
