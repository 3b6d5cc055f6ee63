package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeLLMStderr struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *fakeLLMStderr) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *fakeLLMStderr) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunFakeLLM(t *testing.T) {
	script := filepath.Join(t.TempDir(), "rules.jsonl")
	if err := os.WriteFile(script, []byte(`{"model":"m","mode":"rate_limit","retry_after":"45s"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr fakeLLMStderr
	done := make(chan int, 1)
	go func() {
		done <- runFakeLLM(ctx, []string{"--listen", "127.0.0.1:0", "--script", script}, nil, &bytes.Buffer{}, &stderr)
	}()

	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/v1`)
	var base string
	for deadline := time.Now().Add(5 * time.Second); base == ""; {
		base = re.FindString(stderr.String())
		if time.Now().After(deadline) {
			t.Fatalf("no base URL printed: %q", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Post(base+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tr.CloseIdleConnections()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "45" {
		t.Fatalf("scripted rule not applied: %d %v", resp.StatusCode, resp.Header)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestRunFakeLLM_BadArgs(t *testing.T) {
	var stderr bytes.Buffer
	if code := runFakeLLM(context.Background(), []string{"--nope"}, nil, &bytes.Buffer{}, &stderr); code != 2 {
		t.Fatalf("bad flag exit %d", code)
	}
	// A script that is missing or unreadable is a bad argument (exit 2, as usage says).
	if code := runFakeLLM(context.Background(), []string{"--script", "/does/not/exist"}, nil, &bytes.Buffer{}, &stderr); code != exitUsage {
		t.Fatalf("missing script exit %d", code)
	}
	bad := filepath.Join(t.TempDir(), "rules.jsonl")
	if err := os.WriteFile(bad, []byte("{not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := runFakeLLM(context.Background(), []string{"--script", bad}, nil, &bytes.Buffer{}, &stderr); code != exitUsage || !strings.Contains(stderr.String(), bad) {
		t.Fatalf("malformed script exit %d, stderr %q", code, stderr.String())
	}
}
