package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/peakrss"
)

// rssChildEnv switches the test binary into a child of TestT1_PeakRSS; its value
// is the fake's base URL, rssModeEnv the mode (the model name) to call,
// rssOpEnv the call (chat or probe) and rssAPIEnv the protocol.
const (
	rssChildEnv = "DETOUR_LLM_RSS_CHILD"
	rssModeEnv  = "DETOUR_LLM_RSS_MODE"
	rssOpEnv    = "DETOUR_LLM_RSS_OP"
	rssAPIEnv   = "DETOUR_LLM_RSS_API"
)

// rssReport is what a child prints: how its call ended and its peak RSS.
type rssReport struct {
	Err      string // "" = success, else the failure
	Reason   string
	Text     int // bytes of answer text returned
	VmHWMKiB int64
}

// rssChild runs one Chat or one Probe against the parent's fake and prints an
// rssReport on stdout.
func rssChild() int {
	mode := os.Getenv(rssModeEnv)
	api := API(os.Getenv(rssAPIEnv))
	c, err := New(Config{Provider: string(api), API: api, BaseURL: os.Getenv(rssChildEnv), ProfileID: string(api) + ":main",
		APIKey: canary, IdleTimeout: 10 * time.Second, APIVersion: map[API]string{APIAzure: "2024-10-21"}[api]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rep rssReport
	explain := func(err error) (string, string) {
		var f *failover.Failure
		if errors.As(err, &f) {
			return f.Error(), string(f.Reason)
		}
		if err != nil {
			return err.Error(), ""
		}
		return "", ""
	}
	if os.Getenv(rssOpEnv) == "probe" {
		rep.Err, rep.Reason = explain(c.Probe(ctx, mode))
	} else {
		out, err := c.Chat(ctx, Request{Model: mode, Messages: []Message{{Role: "user", Content: "hello"}}}, nil)
		rep.Err, rep.Reason = explain(err)
		rep.Text = len(out.Text)
	}
	c.CloseIdleConnections()
	return peakrss.Report(&rep, &rep.VmHWMKiB)
}

// TestT1_PeakRSS runs the real client of every protocol in a child process
// against every hostile mode of the fake (served here, in the parent, in that
// protocol's shapes) and checks the child's peak RSS stays under 100 MB while
// each call fails or is cut at its cap. covers T1, T2
func TestT1_PeakRSS(t *testing.T) {
	peakrss.Require(t)
	const limitKiB = 100_000_000 / 1024 // 100 MB
	cases := []struct {
		mode                fakeprovider.Mode
		chatSays, probeSays string // "" = success
	}{
		{fakeprovider.ModeOK, "", ""}, // the baseline
		{fakeprovider.ModeGzipBomb, `Content-Encoding "gzip"`, `Content-Encoding "gzip"`},
		{fakeprovider.ModeEndlessStream, "limits.max_response_bytes", "limits.max_response_bytes"},
		{fakeprovider.ModeHugeLine, "stream line longer than", "limits.max_response_bytes"},
		{fakeprovider.ModeHugeChunk, "stream line longer than", "limits.max_response_bytes"},
		{fakeprovider.ModeHugeErrorBody, "HTTP 500", "HTTP 500"},
		{fakeprovider.ModeRedirectOtherPort, "redirect", "redirect"},
		{fakeprovider.ModeRedirectLoop, "redirect", "redirect"},
	}
	fake := fakeprovider.New()
	for _, tc := range cases {
		fake.Script(fakeprovider.Rule{Model: string(tc.mode), Mode: tc.mode})
	}
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	for _, k := range kinds {
		for _, tc := range cases {
			for _, op := range []string{"chat", "probe"} {
				want := tc.chatSays
				if op == "probe" {
					want = tc.probeSays
				}
				t.Run(string(k.api)+"/"+string(tc.mode)+"/"+op, func(t *testing.T) {
					rep := runRSSChild(t, fake.BaseURLFor(k.provider(), k.fake), k.api, tc.mode, op)
					t.Logf("peak RSS %.1f MiB; %s", float64(rep.VmHWMKiB)/1024, orOK(rep.Err))
					if rep.VmHWMKiB >= limitKiB {
						t.Errorf("T1: peak RSS %d KiB, want under 100 MB", rep.VmHWMKiB)
					}
					if (want == "") != (rep.Err == "") || !strings.Contains(rep.Err, want) {
						t.Errorf("call ended %q, want %q", rep.Err, want)
					}
					if want != "" && want != "HTTP 500" && rep.Reason != refusedReason {
						t.Errorf("reason %q, want %q", rep.Reason, refusedReason)
					}
					if strings.Contains(rep.Err, "CANARY") {
						t.Errorf("key in %q", rep.Err)
					}
					if rep.Text > DefaultMaxAnswerBytes {
						t.Errorf("T1: %d bytes of answer returned", rep.Text)
					}
				})
			}
		}
	}
	if hits := fake.TrapHits(); len(hits) != 0 {
		t.Errorf("T2: the redirect target was reached: %+v", hits)
	}
}

// refusedReason is the reason a refused response fails with (T1, T2, A2).
var refusedReason = string(classify.ReasonRefusedResponse)

// runRSSChild re-executes the test binary as a child that makes one call.
func runRSSChild(t *testing.T, baseURL string, api API, mode fakeprovider.Mode, op string) rssReport {
	t.Helper()
	out := peakrss.Child(t, rssChildEnv+"="+baseURL, rssModeEnv+"="+string(mode), rssOpEnv+"="+op, rssAPIEnv+"="+string(api))
	var rep rssReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	return rep
}

func orOK(s string) string {
	if s == "" {
		return "ok"
	}
	return s
}
