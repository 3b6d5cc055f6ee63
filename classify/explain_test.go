package classify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestClassify_Explanation: every step names itself, its rule and its evidence,
// and the effective status says where it came from (C2, issue 13's precedence).
func TestClassify_Explanation(t *testing.T) {
	cases := []struct {
		name       string
		r          Response
		step       Step
		rule       string // prefix
		evidence   string // substring
		status     int
		statusFrom string
	}{
		{"transport", Response{Err: fmt.Errorf("x: %w", ErrIdleTimeout)}, StepTransport, "transport/idle-timeout", "idle", 0, ""},
		{"cancel", Response{Err: context.Canceled}, StepTransport, "transport/cancelled", "cancel", 0, ""},
		{"field", Response{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
			StepField, "field/overloaded_error", "error.type=overloaded_error", 529, "http"},
		{"aws header", Response{Status: 400, Headers: map[string]string{"X-Amzn-ErrorType": "ThrottlingException:http://x"}, Body: `{"message":"Please slow your rate."}`},
			StepText, "rate-limit/slow-down", "slow your rate", 400, "http"},
		{"text beats status", Response{Status: 401, Body: `{"error":{"message":"Insufficient balance. Please top up."}}`},
			StepText, "billing/insufficient-funds", "insufficient balance", 401, "http"},
		{"body code under a gateway 5xx", Response{Status: 503, Body: `{"error":{"message":"upstream unavailable","type":"upstream_error","code":429}}`},
			StepStatus, "status/429", "status 429 in the body", 429, "body"},
		{"http 4xx beats body code", Response{Status: 401, Body: `{"error":{"message":"bad key","code":429}}`},
			StepText, "auth/bad-credential", "bad key", 401, "http"},
		{"status stated in text", Response{Body: "Error code: 403 - nothing more"},
			StepStatus, "status/403", "status 403 in the text", 403, "text"},
		{"status default", Response{Status: 500, Body: `{"error":{"message":"server boom","code":500}}`},
			StepStatus, "status/500", "500", 500, "body"},
		{"nothing", Response{Body: "weird thing"}, StepDefault, "default/unclassified", "no rule", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := Classify(c.r, clNow).Why
			if w.Step != c.step || !strings.HasPrefix(w.Rule, c.rule) || !strings.Contains(w.Evidence, c.evidence) ||
				w.Status != c.status || w.StatusFrom != c.statusFrom {
				t.Fatalf("why = %+v", w)
			}
		})
	}
	if w := Classify(Response{Status: 429, Headers: map[string]string{"Retry-After": "3"}}, clNow).Why; w.Recovery != "header retry-after" {
		t.Fatalf("recovery source = %q", w.Recovery)
	}
	if w := Classify(Response{Body: "Rate limit reached. Please try again in 20s."}, clNow).Why; w.Recovery != "text" {
		t.Fatalf("recovery source = %q", w.Recovery)
	}
}

// TestDescribe_PlainWords: people read what happened; a timeout-family reason
// with a 5xx is a server error, never "timeout" (issue 13).
func TestDescribe_PlainWords(t *testing.T) {
	cases := []struct {
		r      Reason
		status int
		want   string
	}{
		{ReasonTimeout, 500, "server error (HTTP 500)"},
		{ReasonTimeout, 503, "server error (HTTP 503)"},
		{ReasonTimeout, 504, "server error (HTTP 504)"},
		{ReasonTimeout, 408, "timed out (HTTP 408)"},
		{ReasonTimeout, 200, "stream broke off"},
		{ReasonTimeout, 0, "timed out or unreachable"},
		{ReasonTimeout, StatusUnknown, "timed out or server error"},
		{ReasonOverloaded, 529, "overloaded"},
		{ReasonBilling, 402, "out of credits"},
		{ReasonRateLimit, 429, "rate limit"},
		{ReasonAuth, 401, "invalid API key"},
		{ReasonAuth, 403, "access denied"},
		{ReasonAuthPermanent, 401, "revoked key"},
		{ReasonModelNotFound, 404, "model not found"},
		{ReasonContextOverflow, 400, "context too long"},
		{ReasonFormat, 400, "invalid request"},
		{ReasonContentFilter, 400, "blocked by content filter"},
		{ReasonUnclassified, 418, "unknown error (HTTP 418)"},
		{ReasonUnclassified, 0, "unknown error"},
		{ReasonIdleTimeout, 200, "stalled (no output)"},
		{ReasonConsecutiveTimeout, 0, "kept failing"},
		{ReasonContextWindow, 0, "context window too small"},
		{ReasonImageInput, 0, "does not take images"}, // covers I5
	}
	for _, c := range cases {
		if got := Describe(c.r, c.status); got != c.want {
			t.Errorf("Describe(%s, %d) = %q, want %q", c.r, c.status, got, c.want)
		}
	}
	for s := 500; s <= 599; s++ {
		if got := Describe(ReasonTimeout, s); strings.Contains(got, "timeout") || strings.Contains(got, "timed out") {
			t.Fatalf("Describe(timeout, %d) = %q", s, got)
		}
	}
	for _, r := range []Reason{ReasonRateLimit, ReasonOverloaded, ReasonBilling, ReasonAuth, ReasonAuthPermanent, ReasonTimeout,
		ReasonModelNotFound, ReasonFormat, ReasonContextOverflow, ReasonContentFilter, ReasonAborted, ReasonEmptyResponse,
		ReasonNoErrorDetails, ReasonUnclassified} {
		if d := Describe(r, 0); d == "" || strings.Contains(d, "_") {
			t.Errorf("Describe(%s) = %q: not plain words", r, d)
		}
	}
}

// TestFamilies_WellFormed: every rule has a name unique in its family, keys in
// lower case, and something to match; the codes are normalised.
func TestFamilies_WellFormed(t *testing.T) {
	for _, f := range families() {
		seen := map[string]bool{}
		for _, r := range f.rules {
			if r.name == "" || seen[r.name] {
				t.Errorf("%s: rule name %q empty or repeated", f.name, r.name)
			}
			seen[r.name] = true
			for _, k := range append(append([]string{}, r.keys...), r.also...) {
				if k == "" || k != strings.ToLower(k) {
					t.Errorf("%s/%s: key %q not lower case", f.name, r.name, k)
				}
			}
			if len(r.keys) == 0 && len(r.alts) == 0 && r.check == nil {
				t.Errorf("%s/%s: matches nothing", f.name, r.name)
			}
		}
	}
	for code := range codeTable {
		if normalizeCode(code) != code {
			t.Errorf("code %q is not in normalised form (%q)", code, normalizeCode(code))
		}
	}
	if !errors.Is(fmt.Errorf("w: %w", ErrEmptyOutput), ErrEmptyOutput) {
		t.Fatal("sentinels must wrap")
	}
}
