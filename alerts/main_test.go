package alerts

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every Dispatcher
// goroutine is stopped by Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
