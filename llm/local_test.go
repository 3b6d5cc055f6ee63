package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
)

// failingDial is a transport whose every dial fails with err, the way the
// standard library reports a socket it could not open.
func failingDial(err error) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
		},
	}}
}

// cancelling is a round tripper that reports a cancellation nobody asked for.
type cancelling struct{}

func (cancelling) RoundTrip(*http.Request) (*http.Response, error) { return nil, context.Canceled }

// covers A4, C6: failures on our side of the network are local, never the
// provider's; a provider that refuses connections stays the provider's fault.
func TestChat_A4_OwnFaultsAreLocal(t *testing.T) {
	fake := fakeprovider.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	closed := "http://127.0.0.1:1/v1" // nothing listens on port 1
	cases := []struct {
		name string
		base string
		hc   *http.Client
		want classify.Reason
	}{
		{"EMFILE: too many open files", fake.BaseURL("openai"), failingDial(os.NewSyscallError("socket", syscall.EMFILE)), classify.ReasonLocal},
		{"ENFILE: file table full", fake.BaseURL("openai"), failingDial(os.NewSyscallError("socket", syscall.ENFILE)), classify.ReasonLocal},
		{"ENOMEM: cannot allocate memory", fake.BaseURL("openai"), failingDial(os.NewSyscallError("socket", syscall.ENOMEM)), classify.ReasonLocal},
		{"the configured proxy refuses", fake.BaseURL("openai"), &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "127.0.0.1:1"})}}, classify.ReasonLocal},
		{"a cancellation the caller did not make", fake.BaseURL("openai"), &http.Client{Transport: cancelling{}}, classify.ReasonLocal},
		{"the provider refuses connections (C6)", closed, nil, classify.ReasonTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newPlainClient(t, tc.base, tc.hc)
			_, err := c.Chat(context.Background(), userReq("m", "x"), nil)
			f := asFailure(t, err)
			if f.Reason != tc.want || f.Class != classify.ReasonClass(tc.want) {
				t.Fatalf("failure %+v, want %s", f, tc.want)
			}
			if err := c.Probe(context.Background(), "m"); asFailure(t, err).Reason != tc.want {
				t.Fatalf("probe: %v, want %s", err, tc.want)
			}
		})
	}
	if n := fake.CallCount(fakeprovider.Filter{}); n != 0 {
		t.Fatalf("the provider saw %d calls", n)
	}
	// The caller's own cancel stays an abort (R2: never advance on it).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := newPlainClient(t, fake.BaseURL("openai"), nil)
	if _, err := c.Chat(ctx, userReq("m", "x"), nil); asFailure(t, err).Reason != classify.ReasonAborted {
		t.Fatalf("caller cancel: %v", err)
	}
}

func newPlainClient(t *testing.T, base string, hc *http.Client) *Client {
	t.Helper()
	c, err := New(Config{Provider: "openai", BaseURL: base, ProfileID: "openai:main", APIKey: canary,
		IdleTimeout: 3 * time.Second, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// emfileChildEnv switches the test binary into a child of
// TestChat_A4_RealEMFILEIsLocal; its value is the fake's base URL.
const emfileChildEnv = "DETOUR_LLM_EMFILE_CHILD"

// emfileChild exhausts its own file descriptors, makes one call and prints the
// failure's reason and message as JSON.
func emfileChild() int {
	c, err := New(Config{Provider: "openai", BaseURL: os.Getenv(emfileChildEnv), ProfileID: "openai:main",
		APIKey: canary, IdleTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lim.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				fmt.Fprintln(os.Stderr, "filling descriptors:", err)
				return 2
			}
			break
		}
		held = append(held, f)
	}
	_, err = c.Chat(context.Background(), userReq("m", "x"), nil)
	out := map[string]string{"reason": "", "message": fmt.Sprint(err)}
	var f *failover.Failure
	if errors.As(err, &f) {
		out["reason"], out["message"] = string(f.Reason), f.Message
	}
	for _, f := range held {
		_ = f.Close()
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// covers A4: a real EMFILE (the process ran out of descriptors, as under an fd
// flood) fails the call as local, and the provider is never reached.
func TestChat_A4_RealEMFILEIsLocal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's RLIMIT_NOFILE semantics; the mechanism is covered by TestChat_A4_OwnFaultsAreLocal")
	}
	fake := fakeprovider.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), emfileChildEnv+"="+fake.BaseURL("openai"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	var got map[string]string
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("child said %q: %v", stdout, err)
	}
	if got["reason"] != string(classify.ReasonLocal) || !strings.Contains(got["message"], "too many open files") {
		t.Fatalf("child's call ended %v, want local naming too many open files", got)
	}
	if n := fake.CallCount(fakeprovider.Filter{}); n != 0 {
		t.Fatalf("the provider saw %d calls", n)
	}
}
