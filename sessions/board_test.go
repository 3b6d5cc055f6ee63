//go:build cgo

package sessions

import (
	"context"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// TestReadBoard_Issue38_Records: the board's durable records are written by
// the code that notices each change: the fallback notice with its models, the
// active fallback, the all-down period from its report to the success that
// ends it, the billing failure, the day's usage.
// covers issue 38, N1, N2, V4
func TestReadBoard_Issue38_Records(t *testing.T) { testdb.Each(t, testReadBoardRecords) }

func testReadBoardRecords(t *testing.T, driver string) {
	h := newHarness(t, driver)
	ctx := context.Background()
	start := h.clock.Now()
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529})
	h.say(key1, "hello")
	recs, err := ReadBoard(ctx, h.db, start.Add(-time.Hour), start.Format(time.DateOnly))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Notices) != 1 || recs.Notices[0].Selected != mPrimary || recs.Notices[0].Active != mFallback || recs.Notices[0].Reason != "overloaded" {
		t.Fatalf("N1's notice as the board reads it: %+v", recs.Notices)
	}
	if len(recs.Fallbacks) != 1 || recs.Fallbacks[0].Origin != mPrimary || recs.Fallbacks[0].Model != mFallback || recs.Fallbacks[0].Session != key1 {
		t.Fatalf("active fallbacks: %+v", recs.Fallbacks)
	}
	if len(recs.Usage) == 0 {
		t.Fatal("no usage today")
	}

	// All down: the V4 report opens a period; the next success closes it.
	h.fake.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeBilling402})
	h.fake.Script(fakeprovider.Rule{Provider: "p3", Mode: fakeprovider.ModeRevoked403})
	h.clock.Advance(time.Minute)
	opened := h.clock.Now()
	expect(t, h.say("test:s2", "anyone?"), "error")
	recs, err = ReadBoard(ctx, h.db, start.Add(-time.Hour), start.Format(time.DateOnly))
	if err != nil {
		t.Fatal(err)
	}
	if !recs.Incident || len(recs.Incidents) != 1 || !recs.Incidents[0].Closed.IsZero() || recs.Incidents[0].Opened.Before(opened) {
		t.Fatalf("open incident: %v %+v", recs.Incident, recs.Incidents)
	}
	if len(recs.Disables) == 0 || recs.Disables[0].Profile != "p2:main" || recs.Disables[0].Reason != "billing" {
		t.Fatalf("billing disable: %+v", recs.Disables)
	}
	h.fake.Reset()
	h.clock.Advance(10 * time.Minute)
	expect(t, h.say("test:s3", "back?"), "reply")
	recs, err = ReadBoard(ctx, h.db, start.Add(-time.Hour), start.Format(time.DateOnly))
	if err != nil {
		t.Fatal(err)
	}
	if recs.Incident || len(recs.Incidents) != 1 || recs.Incidents[0].Closed.Sub(recs.Incidents[0].Opened) < 10*time.Minute {
		t.Fatalf("closed incident: %v %+v", recs.Incident, recs.Incidents)
	}
}

// covers V4, issue 38: an all-down period is on the board's timeline though
// no admin channel is set and no webhook listens: the incident opens whoever
// is told.
func TestReadBoard_Issue38_AllDownWithoutAnAdminChannel(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		h := newHarness(t, driver, func(c *Config, _ *harness) { c.AdminChannel = "" })
		ctx := context.Background()
		for _, p := range []string{"p1", "p2", "p3"} {
			h.fake.Script(fakeprovider.Rule{Provider: p, Mode: fakeprovider.ModeUnavailable503})
		}
		expect(t, h.say(key1, "anyone?"), "error")
		recs, err := ReadBoard(ctx, h.db, h.clock.Now().Add(-time.Hour), h.clock.Now().Format(time.DateOnly))
		if err != nil {
			t.Fatal(err)
		}
		if !recs.Incident || len(recs.Incidents) != 1 {
			t.Fatalf("the all-down period is missing: %v %+v", recs.Incident, recs.Incidents)
		}
		if out := h.admin.take(); len(out) != 0 {
			t.Errorf("a report was sent with no admin channel: %s", dump(out))
		}
	})
}
