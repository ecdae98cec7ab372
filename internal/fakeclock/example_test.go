package fakeclock_test

import (
	"fmt"
	"time"

	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
)

func Example() {
	clk := fakeclock.New(time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC))
	now := clk.Now // what a relay's Options.Now takes
	clk.Add(90 * time.Second)
	fmt.Println(now().Format(time.TimeOnly))
	clk.Set(time.Date(2026, 1, 13, 12, 0, 0, 0, time.UTC))
	fmt.Println(now().Format(time.TimeOnly))
	// Output:
	// 10:01:30
	// 12:00:00
}
