package store

import (
	"errors"
	"fmt"
	"testing"
)

// TestIsRetryable: which failures Transaction runs again, and which say a
// storage problem: the drivers' errors come marked by internal/database
// (its TestMark reads real driver errors).
// covers M2, T7
func TestIsRetryable(t *testing.T) {
	busy := &DriverError{Err: errors.New("database is locked"), Retryable: true}
	full := &DriverError{Err: errors.New("database or disk is full"), Problem: "the disk holding the database is full"}
	tests := []struct {
		name    string
		err     error
		retry   bool
		problem string
	}{
		{"nil", nil, false, ""},
		{"marked retryable, wrapped", fmt.Errorf("wrapped: %w", busy), true, ""},
		{"marked problem", full, false, "the disk holding the database is full"},
		{"concurrent row", errConflict, true, ""},
		{"concurrent row, joined", errors.Join(errConflict, errors.New("table exists")), true, ""},
		{"other", errors.New("boom"), false, ""},
	}
	for _, tc := range tests {
		if got := IsRetryable(tc.err); got != tc.retry {
			t.Errorf("%s: IsRetryable = %v, want %v", tc.name, got, tc.retry)
		}
		if got := Problem(tc.err); got != tc.problem {
			t.Errorf("%s: Problem = %q, want %q", tc.name, got, tc.problem)
		}
	}
	if busy.Error() != "database is locked" || !errors.Is(fmt.Errorf("x: %w", busy), busy.Err) {
		t.Errorf("a DriverError keeps the driver's text and error: %q", busy.Error())
	}
}
