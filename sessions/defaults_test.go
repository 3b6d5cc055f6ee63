//go:build cgo

package sessions

import (
	"strings"
	"testing"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// A slash command typed in a channel (Inbound.DefaultsFor set) chooses the model
// new threads of that channel start with; threads already started keep theirs,
// and a thread's own /model stays its own. covers S4
func TestRouter_S4_ChannelDefaultForNewThreads(t *testing.T) {
	testdb.Each(t, testRouter_S4_ChannelDefaultForNewThreads)
}

func testRouter_S4_ChannelDefaultForNewThreads(t *testing.T, driver string) {
	h := newHarness(t, driver)
	const channel = "test:T1:C1"
	inChannel := func(text string) []adapters.Outbound {
		t.Helper()
		h.sayAs(adapters.Inbound{Channel: "test", SessionKey: channel, User: "test:u1", Text: text,
			ReplyTo: "slash", Native: true, DefaultsFor: "new threads in #general", Admin: true})
		return h.rec.take()
	}
	old := channel + ":100.000001"
	if out := expect(t, h.say(old, "before"), "reply"); out[0].Model != mPrimary {
		t.Fatalf("setup: answered by %s", out[0].Model)
	}

	out := expect(t, inChannel("/model "+mThird), "reply")
	if want := "new threads in #general will use " + mThird; !strings.HasPrefix(out[0].Text, want) || !out[0].Ephemeral {
		t.Fatalf("answer = %q (ephemeral %v), want it to start with %q", out[0].Text, out[0].Ephemeral, want)
	}
	if e := h.entry(channel); e.ModelOverride != "gamma" || e.ModelOverrideSource != "user" {
		t.Fatalf("channel default not stored: %+v", e)
	}

	// A new thread starts on the channel's model, as the user's exact choice.
	fresh := channel + ":200.000001"
	if out := expect(t, h.say(fresh, "hello"), "reply"); out[0].Model != mThird {
		t.Fatalf("new thread answered by %s, want %s", out[0].Model, mThird)
	}
	if e := h.entry(fresh); e.ModelOverride != "gamma" || e.ModelOverrideSource != "user" || e.LiveSwitch {
		t.Fatalf("new thread entry = %+v", e)
	}
	// A thread started before keeps its model.
	if out := expect(t, h.say(old, "after"), "reply"); out[0].Model != mPrimary {
		t.Fatalf("old thread answered by %s, want %s", out[0].Model, mPrimary)
	}
	// "!model" in a thread changes that thread only.
	expect(t, h.say(fresh, "!model "+mFallback), "reply")
	if e := h.entry(channel); e.ModelOverride != "gamma" {
		t.Fatalf("a thread's !model changed the channel default: %+v", e)
	}

	// The first thing said in a new thread may be a command: it inherits too.
	cmdFirst := channel + ":300.000001"
	out = expect(t, h.say(cmdFirst, "!status"), "reply")
	if !strings.Contains(out[0].Text, mThird) {
		t.Fatalf("!status in a new thread = %q, want %s", out[0].Text, mThird)
	}

	// A pinned profile travels with the model.
	expect(t, inChannel("/model "+mPrimary+"@p1:main"), "reply")
	expect(t, h.say(channel+":400.000001", "hi"), "reply")
	if e := h.entry(channel + ":400.000001"); e.AuthProfileOverride != "p1:main" || e.AuthProfileOverrideSource != "user" {
		t.Fatalf("profile not inherited: %+v", e)
	}

	// /new alone says what new threads use; /reset and /model default go back to
	// the configured model.
	for _, cmd := range []string{"/new", "/reset", "/model default"} {
		expect(t, inChannel("/model "+mThird), "reply")
		out = expect(t, inChannel(cmd), "reply")
		want := "new threads in #general will use the configured model " + mPrimary
		if cmd == "/new" {
			want = "new threads in #general will use " + mThird
		}
		if !strings.HasPrefix(out[0].Text, want) {
			t.Fatalf("%s answer = %q, want %q", cmd, out[0].Text, want)
		}
	}
	if out := expect(t, h.say(channel+":500.000001", "hi"), "reply"); out[0].Model != mPrimary {
		t.Fatalf("after /model default a new thread answered by %s", out[0].Model)
	}
	// Bad input is refused like anywhere else.
	if out := expect(t, inChannel("/model nope/x"), "error"); !strings.Contains(out[0].Text, "not configured") {
		t.Fatalf("bad model answer = %q", out[0].Text)
	}
}

// Only a user's choice is a default: an automatic fallback stays with the
// conversation that made it. covers S3, S4
func TestRouter_S3_AutoOverrideIsNotAChannelDefault(t *testing.T) {
	testdb.Each(t, testRouter_S3_AutoOverrideIsNotAChannelDefault)
}

func testRouter_S3_AutoOverrideIsNotAChannelDefault(t *testing.T, driver string) {
	h := newHarness(t, driver)
	const channel = "test:T1:C2"
	expect(t, h.say(channel, "hi"), "reply")
	h.db.Model(&Entry{}).Where("key = ?", channel).Updates(map[string]any{
		"provider_override": "p2", "model_override": "beta", "model_override_source": "auto"})
	if out := expect(t, h.say(channel+":1.000001", "hello"), "reply"); out[0].Model != mPrimary {
		t.Fatalf("new thread answered by %s, want %s", out[0].Model, mPrimary)
	}
	if e := h.entry(channel + ":1.000001"); e.ModelOverride != "" {
		t.Fatalf("auto override inherited: %+v", e)
	}
}

// covers T9: a channel's model for new conversations is set by admins only (the
// default); anyone else gets a clear refusal and nothing changes, while /model
// in a thread or a DM stays theirs; access.channel_model: everyone opens it.
func TestRouter_T9_ChannelModelIsForAdmins(t *testing.T) {
	h := newHarness(t, testdb.SQLite)
	const channel = "test:T1:C1"
	say := func(user, key, text, defaultsFor string) []adapters.Outbound {
		t.Helper()
		h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key, User: user, Text: text, ReplyTo: "slash", Native: true, DefaultsFor: defaultsFor})
		return h.rec.take()
	}
	for _, cmd := range []string{"/model " + mThird, "/model default", "/reset", "/new " + mThird} {
		out := expect(t, say("test:u1", channel, cmd, "new threads in #general"), "error")
		want := "only admins may choose the model for new threads in #general (admin.users; access.channel_model: everyone lets anyone); to choose for one conversation, use !model <model> inside its thread, or /model in a direct message"
		if out[0].Text != want {
			t.Errorf("%s by a non-admin: %q\nwant %q", cmd, out[0].Text, want)
		}
	}
	// /new without a model changes nothing, so anyone may ask.
	expect(t, say("test:u1", channel, "/new", "new threads in #general"), "reply")
	// A thread's own /model, and a DM's, are unchanged.
	expect(t, say("test:u1", channel+":100.000001", "!model "+mThird, ""), "reply")
	expect(t, say("test:u1", "test:D1", "/model "+mThird, ""), "reply")
	// An admin may.
	out := expect(t, say("test:admin", channel, "/model "+mThird, "new threads in #general"), "reply")
	if !strings.HasPrefix(out[0].Text, "new threads in #general will use "+mThird) {
		t.Errorf("admin: %q", out[0].Text)
	}

	open := newHarness(t, testdb.SQLite, func(c *Config, _ *harness) { c.Access.ChannelModelEveryone = true })
	open.sayAs(adapters.Inbound{Channel: "test", SessionKey: channel, User: "test:u1", Text: "/model " + mThird, ReplyTo: "slash", Native: true, DefaultsFor: "new threads in #general"})
	if out := expect(t, open.rec.take(), "reply"); !strings.HasPrefix(out[0].Text, "new threads in #general will use "+mThird) {
		t.Errorf("access.channel_model: everyone: %q", out[0].Text)
	}
}
