package classify

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// covers A4: running out of file descriptors or memory on our side is local
// (class transient), by errno or by the words of a transport error; the same
// words in a provider's body are the provider's, and an answered request is
// never local.
func TestClassify_A4_LocalResources(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		r    Response
		want Reason
	}{
		{"EMFILE errno", Response{Err: fmt.Errorf("dial tcp: %w", os.NewSyscallError("socket", syscall.EMFILE))}, ReasonLocal},
		{"ENFILE errno", Response{Err: os.NewSyscallError("socket", syscall.ENFILE)}, ReasonLocal},
		{"ENOMEM errno", Response{Err: os.NewSyscallError("socket", syscall.ENOMEM)}, ReasonLocal},
		{"EMFILE in the text only", Response{Err: errors.New(`Post "https://api.example/v1/chat/completions": dial tcp: lookup api.example: too many open files`)}, ReasonLocal},
		{"ENOMEM in the text only", Response{Err: errors.New("fork/exec: cannot allocate memory")}, ReasonLocal},
		{"a provider's own out-of-memory body", Response{Status: 500, Body: `{"error":{"message":"CUDA error: cannot allocate memory"}}`, Err: errors.New("500")}, ReasonTimeout},
		{"a refused connection stays the provider's (C6)", Response{Err: errors.New("dial tcp 127.0.0.1:11434: connect: connection refused")}, ReasonTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Classify(c.r, now)
			if v.Reason != c.want || v.Class != ReasonClass(c.want) {
				t.Fatalf("got %s/%s (%s), want %s", v.Reason, v.Class, v.Why.Rule, c.want)
			}
		})
	}
}

// covers A2, A4: the two reasons the engine and the LLM client add are
// transient and have plain words.
func TestDescribe_A2_A4(t *testing.T) {
	for r, want := range map[Reason]string{
		ReasonRefusedResponse: "response refused by detour",
		ReasonLocal:           "detour's own failure, not the provider's",
	} {
		if got := Describe(r, 0); got != want {
			t.Errorf("Describe(%s) = %q, want %q", r, got, want)
		}
		if ReasonClass(r) != ClassTransient {
			t.Errorf("class of %s = %s, want transient", r, ReasonClass(r))
		}
	}
}
