// Package alerts sends detour's operator alerts to webhooks (issue 38): a
// session moving to a fallback model and back, every model down and back, a
// key disabled for billing or auth, a budget reached. Each alert is an Event
// with a stable JSON schema (docs/operations.md "Alerts") and an id derived
// from the change it reports, so every replica that sees the same change
// names it the same way. Hooks get it signed with HMAC-SHA256 over the
// timestamp and the body (Detour-Signature), from a bounded queue that never
// blocks a turn, with bounded retries and exponential backoff; a claim row in
// the shared database (alert_deliveries) makes one replica, once, deliver each
// event to each hook.
//
// This file is pure: the events and their ids.
package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Type is what an event reports; a webhook subscribes to some of them
// (alerts.webhooks[].events).
type Type string

// The event types. Their names are part of the public schema: never renamed.
const (
	// FallbackStarted: a conversation moved from its selected model to a
	// fallback (the N1 notice), or to another fallback.
	FallbackStarted Type = "fallback_started"
	// FallbackCleared: a conversation is back on its selected model (N2).
	FallbackCleared Type = "fallback_cleared"
	// AllDown: a turn found every model of its chain unavailable (the V4
	// incident, once per incident across replicas).
	AllDown Type = "all_down"
	// Recovered: a model answered again after AllDown (or /recover ended it).
	Recovered Type = "recovered"
	// KeyDisabled: a key (auth profile) was disabled for billing or a
	// permanent auth failure (D3, D4).
	KeyDisabled Type = "key_disabled"
	// BudgetReached: a paid call was refused by a limit: a user's daily
	// allowance (T6), a turn's budget (B1) or the per-minute cap (B2).
	BudgetReached Type = "budget_reached"
)

// Types lists every event type, in the documented order.
var Types = []Type{FallbackStarted, FallbackCleared, AllDown, Recovered, KeyDisabled, BudgetReached}

// Valid reports whether t is a known event type.
func (t Type) Valid() bool {
	for _, k := range Types {
		if t == k {
			return true
		}
	}
	return false
}

// SchemaVersion is the body's "schema" field: it changes only if a field
// changes meaning; new fields may appear without it changing.
const SchemaVersion = 1

// Event is one alert: the JSON body a webhook receives. It never holds a
// secret: keys are named by their profile id, errors are not quoted.
type Event struct {
	ID      string    `json:"id"`   // "evt_" + 32 hex digits, the same on every replica for one change
	Type    Type      `json:"type"` // one of Types
	Time    time.Time `json:"time"` // when detour saw the change (UTC, RFC 3339)
	Schema  int       `json:"schema"`
	Summary string    `json:"summary"` // one line for people
	Data    Data      `json:"data"`
}

// Data holds the fields of an event; each type sets the ones documented for
// it and the others are left out of the JSON.
type Data struct {
	Session        string     `json:"session,omitempty"`          // conversation key: fallback_*, all_down, budget_reached
	User           string     `json:"user,omitempty"`             // budget_reached (user_daily_budget)
	RequestedModel string     `json:"requested_model,omitempty"`  // fallback_*: the model the conversation selected
	FallbackModel  string     `json:"fallback_model,omitempty"`   // fallback_*: the fallback that answered (started) or answered until now (cleared)
	Reason         string     `json:"reason,omitempty"`           // fallback_started, key_disabled: why (rate_limit, billing, auth_permanent, timeout, ...)
	Status         int        `json:"status,omitempty"`           // HTTP status behind Reason; absent when none
	Provider       string     `json:"provider,omitempty"`         // key_disabled
	KeyID          string     `json:"key_id,omitempty"`           // key_disabled: the auth profile id ("openai:main"), never the key
	Model          string     `json:"model,omitempty"`            // key_disabled of a provider without keys
	Until          *time.Time `json:"until,omitempty"`            // key_disabled: disabled until
	Since          *time.Time `json:"since,omitempty"`            // all_down, recovered: when the incident began
	DurationSec    float64    `json:"duration_seconds,omitempty"` // recovered: how long it lasted
	Models         []Down     `json:"models,omitempty"`           // all_down: each model tried and why it failed
	Guard          string     `json:"guard,omitempty"`            // budget_reached: user_daily_budget, turn_budget or paid_calls_per_minute
}

// Down is one model of an all_down event.
type Down struct {
	Model   string     `json:"model"`
	KeyID   string     `json:"key_id,omitempty"`
	Reason  string     `json:"reason"`
	Status  int        `json:"status,omitempty"`
	RetryAt *time.Time `json:"retry_at,omitempty"` // when detour tries it again, when known
}

// Body is the event's JSON, the bytes that are signed and sent.
func (e Event) Body() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("alerts: encode %s: %w", e.Type, err)
	}
	return b, nil
}

// eventID derives an event's id from its type and the parts that name the
// change: the same change gives the same id on every replica and every retry.
func eventID(t Type, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(t))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return "evt_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// stamp names an instant exactly, for ids.
func stamp(t time.Time) string { return strconv.FormatInt(t.UTC().UnixNano(), 10) }

func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func newEvent(t Type, at time.Time, id, summary string, d Data) Event {
	return Event{ID: id, Type: t, Time: at.UTC(), Schema: SchemaVersion, Summary: summary, Data: d}
}

// Fallback is a conversation's change of model as its notice state records
// it (N1-N3): Turn names the stored exchange that made the change, unique to
// the one replica that ran the turn.
type Fallback struct {
	Session   string
	Turn      string
	Requested string // the selected model
	Fallback  string // the fallback answering now (started) or until now (cleared)
	Reason    string // why it left Requested (started)
	Status    int
}

// NewFallbackStarted is the fallback_started event of f.
func NewFallbackStarted(at time.Time, f Fallback) Event {
	sum := fmt.Sprintf("%s: answering with fallback %s instead of %s (%s)", f.Session, f.Fallback, f.Requested, orNone(f.Reason))
	return newEvent(FallbackStarted, at, eventID(FallbackStarted, f.Session, f.Turn, f.Fallback), sum,
		Data{Session: f.Session, RequestedModel: f.Requested, FallbackModel: f.Fallback, Reason: f.Reason, Status: f.Status})
}

// NewFallbackCleared is the fallback_cleared event of f.
func NewFallbackCleared(at time.Time, f Fallback) Event {
	sum := fmt.Sprintf("%s: back on %s (was %s)", f.Session, f.Requested, f.Fallback)
	return newEvent(FallbackCleared, at, eventID(FallbackCleared, f.Session, f.Turn), sum,
		Data{Session: f.Session, RequestedModel: f.Requested, FallbackModel: f.Fallback})
}

// NewAllDown is the all_down event of the incident that began at since (the
// instant the shared incident row records, V4), seen by a turn of session.
func NewAllDown(since time.Time, session string, models []Down) Event {
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Model + " " + m.Reason
	}
	sum := "every model is unavailable: " + orNone(strings.Join(names, ", "))
	return newEvent(AllDown, since, eventID(AllDown, stamp(since)), sum,
		Data{Session: session, Since: utc(since), Models: models})
}

// NewRecovered is the recovered event of the incident that began at since,
// ended at at.
func NewRecovered(at, since time.Time) Event {
	d := at.Sub(since).Round(time.Second)
	sum := fmt.Sprintf("a model answers again after %s with every model unavailable", d)
	return newEvent(Recovered, at, eventID(Recovered, stamp(since)), sum,
		Data{Since: utc(since), DurationSec: d.Seconds()})
}

// NewKeyDisabled is the key_disabled event of the disable of state key key
// until until (the engine's durable profile state, D3, D4): a profile id
// "provider:name", or "noauth:provider/model" for a provider without keys.
func NewKeyDisabled(at time.Time, key, reason string, until time.Time) Event {
	d := Data{Reason: reason, Until: utc(until)}
	name := key
	if ref, ok := strings.CutPrefix(key, "noauth:"); ok {
		d.Model = ref
		d.Provider, _, _ = strings.Cut(ref, "/")
		name = ref
	} else {
		d.KeyID = key
		d.Provider, _, _ = strings.Cut(key, ":")
	}
	sum := fmt.Sprintf("%s disabled until %s (%s)", name, until.UTC().Format(time.RFC3339), orNone(reason))
	return newEvent(KeyDisabled, at, eventID(KeyDisabled, key, stamp(until)), sum, d)
}

// The guards of budget_reached (sessions.Guard*).
const (
	GuardUserBudget = "user_daily_budget"
	GuardTurnBudget = "turn_budget"
	GuardPerMinute  = "paid_calls_per_minute"
)

// NewBudgetReached is the budget_reached event of a turn of session, sent by
// user, refused by guard at at. Its id names the budget's window, so each
// budget is reported once per window across replicas: a user's daily
// allowance once per user and UTC day, the per-minute cap once per minute, a
// turn's budget once per turn (turn names it).
func NewBudgetReached(at time.Time, guard, session, user, turn string) Event {
	var id, sum string
	d := Data{Guard: guard, Session: session}
	switch guard {
	case GuardUserBudget:
		d.User = user
		id = eventID(BudgetReached, guard, user, at.UTC().Format(time.DateOnly))
		sum = fmt.Sprintf("%s reached the daily allowance (limits.per_user_daily_*)", user)
	case GuardPerMinute:
		id = eventID(BudgetReached, guard, at.UTC().Truncate(time.Minute).Format(time.RFC3339))
		sum = "paid calls reached limits.max_paid_attempts_per_minute"
	default:
		id = eventID(BudgetReached, guard, session, turn)
		sum = fmt.Sprintf("%s: a turn reached its budget (agents.defaults.budget)", session)
	}
	return newEvent(BudgetReached, at, id, sum, d)
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
