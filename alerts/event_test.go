package alerts

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/events.golden.json")

// samples is one event of every type, from fixed inputs.
func samples() []Event {
	retry := t0.Add(10 * time.Minute)
	return []Event{
		NewFallbackStarted(t0, Fallback{Session: "slack:T1:C1", Turn: "9f86d081884c7d659a2feaa0", Requested: "openai/gpt-4o", Fallback: "anthropic/claude-sonnet-4", Reason: "rate_limit", Status: 429}),
		NewFallbackCleared(t0.Add(5*time.Minute), Fallback{Session: "slack:T1:C1", Turn: "3c59dc048e8850243be8079a", Requested: "openai/gpt-4o", Fallback: "anthropic/claude-sonnet-4"}),
		NewAllDown(t0, "discord:42", []Down{
			{Model: "openai/gpt-4o", KeyID: "openai:main", Reason: "timeout", Status: 500, RetryAt: &retry},
			{Model: "anthropic/claude-sonnet-4", KeyID: "anthropic:main", Reason: "billing", Status: 402},
		}),
		NewRecovered(t0.Add(7*time.Minute+30*time.Second), t0),
		NewKeyDisabled(t0, "openai:main", "billing", t0.Add(5*time.Hour)),
		NewBudgetReached(t0, GuardUserBudget, "slack:T1:C1", "slack:U123", "1"),
	}
}

// The body of every event type matches the documented schema
// (testdata/events.golden.json, shown in docs/operations.md): a field
// renamed or removed fails here. Run with -update after adding one.
func TestEvent_SchemaGolden(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString("[\n")
	for i, e := range samples() {
		b, err := e.Body()
		if err != nil {
			t.Fatal(err)
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, b, "  ", "  "); err != nil {
			t.Fatal(err)
		}
		buf.WriteString("  ")
		buf.Write(pretty.Bytes())
		if i < len(samples())-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("]\n")
	path := filepath.Join("testdata", "events.golden.json")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("bodies differ from %s (run with -update if the change is meant):\n%s", path, buf.String())
	}
}

// Every type is in the golden file, and every id is "evt_" and 32 hex digits.
func TestEvent_EveryTypeHasAnID(t *testing.T) {
	seen := map[Type]bool{}
	for _, e := range samples() {
		seen[e.Type] = true
		if len(e.ID) != 36 || !strings.HasPrefix(e.ID, "evt_") || e.Schema != SchemaVersion {
			t.Errorf("%s: id %q schema %d", e.Type, e.ID, e.Schema)
		}
	}
	for _, ty := range Types {
		if !seen[ty] {
			t.Errorf("no sample of %s", ty)
		}
	}
}

// Ids name the change, not the moment it was seen: two replicas that see
// the same change at different instants derive the same id; another change
// gets another.
func TestEvent_IDsAreDerivedFromTheChange(t *testing.T) {
	later := t0.Add(3 * time.Second)
	f := Fallback{Session: "s", Turn: "x1", Requested: "a/b", Fallback: "c/d", Reason: "timeout"}
	g := f
	g.Turn = "x2"
	tests := []struct {
		name      string
		a, b      Event
		wantEqual bool
	}{
		{"fallback, same turn seen twice", NewFallbackStarted(t0, f), NewFallbackStarted(later, f), true},
		{"fallback, another turn", NewFallbackStarted(t0, f), NewFallbackStarted(t0, g), false},
		{"cleared differs from started", NewFallbackStarted(t0, f), NewFallbackCleared(t0, f), false},
		{"all down, one incident", NewAllDown(t0, "s1", nil), NewAllDown(t0, "s2", nil), true},
		{"all down, another incident", NewAllDown(t0, "s1", nil), NewAllDown(later, "s1", nil), false},
		{"recovered, one incident", NewRecovered(later, t0), NewRecovered(later.Add(time.Second), t0), true},
		{"key disabled, one window", NewKeyDisabled(t0, "p:k", "billing", later), NewKeyDisabled(later, "p:k", "billing", later), true},
		{"key disabled, next window", NewKeyDisabled(t0, "p:k", "billing", later), NewKeyDisabled(t0, "p:k", "billing", later.Add(time.Hour)), false},
		{"user budget, same day", NewBudgetReached(t0, GuardUserBudget, "s1", "u", "1"), NewBudgetReached(t0.Add(time.Hour), GuardUserBudget, "s2", "u", "2"), true},
		{"user budget, next day", NewBudgetReached(t0, GuardUserBudget, "s1", "u", "1"), NewBudgetReached(t0.Add(24*time.Hour), GuardUserBudget, "s1", "u", "1"), false},
		{"per-minute cap, same minute", NewBudgetReached(t0, GuardPerMinute, "s1", "u", "1"), NewBudgetReached(t0.Add(30*time.Second), GuardPerMinute, "s2", "v", "2"), true},
		{"turn budget, other turns", NewBudgetReached(t0, GuardTurnBudget, "s1", "u", "1"), NewBudgetReached(t0, GuardTurnBudget, "s1", "u", "2"), false},
	}
	for _, tc := range tests {
		if eq := tc.a.ID == tc.b.ID; eq != tc.wantEqual {
			t.Errorf("%s: ids %s and %s, want equal=%v", tc.name, tc.a.ID, tc.b.ID, tc.wantEqual)
		}
	}
}

// A key_disabled event names the key by its profile id, never by its value.
func TestEvent_KeyDisabledNamesTheProfile(t *testing.T) {
	e := NewKeyDisabled(t0, "openai:main", "auth_permanent", t0.Add(time.Hour))
	if e.Data.KeyID != "openai:main" || e.Data.Provider != "openai" || e.Data.Model != "" {
		t.Fatalf("%+v", e.Data)
	}
	e = NewKeyDisabled(t0, "noauth:ollama/llama3", "billing", t0.Add(time.Hour))
	if e.Data.KeyID != "" || e.Data.Provider != "ollama" || e.Data.Model != "ollama/llama3" {
		t.Fatalf("%+v", e.Data)
	}
}
