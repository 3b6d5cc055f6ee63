package discord_test

import (
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

// boardWait bounds a wait for the board feed (its pace, a look at most every
// 2 s, runs on the world's virtual clock: it costs no real time).
const boardWait = 15 * time.Second

func isStatus(m fakediscord.Message) bool {
	return m.ChannelID == "ADMIN" && strings.HasPrefix(m.Content, "**detour health**")
}

// TestE2E_Issue38_StatusMessageEditedInPlace: the admin channel gets one
// status message when the board first has something to say (a fallback); a
// later change (all models down) edits it, never posts another; once a
// moderator deletes it, the next change posts it again (the edit's 404, code
// 10008 Unknown Message, as the fake answers for a deleted message).
// covers issue 38
func TestE2E_Issue38_StatusMessageEditedInPlace(t *testing.T) {
	e := newE2E(t)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529})
	e.fake.SendMention("G1", "C1", "U1", "hello")
	msgs, err := e.fake.WaitMessages(boardWait, 1, func(m fakediscord.Message) bool {
		return isStatus(m) && strings.Contains(m.Content, "`p1/alpha` → `p2/beta`")
	})
	if err != nil {
		t.Fatalf("no status message after the fallback: %v\n%s", err, e.logs.String())
	}
	status := msgs[0]
	if strings.Contains(status.Content, "CANARY") || !strings.Contains(status.Content, "key `p1:main`") {
		t.Errorf("the admin channel's board: %q", status.Content)
	}

	// Everything fails: the same message now says so.
	e.llm.Script(fakeprovider.Rule{Mode: fakeprovider.ModeOverloaded529})
	e.clock.Advance(time.Minute)
	e.fake.SendMention("G1", "C2", "U1", "anyone?")
	e.waitFor("the status message edited to all down", func() bool {
		m, _ := e.fake.Message(status.ID)
		return strings.Contains(m.Content, "All models are unavailable")
	})
	if n := countStatus(e.fake); n != 1 {
		t.Fatalf("%d status messages, want the one edited", n)
	}
	edited := 0
	for _, ed := range e.fake.Edits() {
		if ed.MessageID == status.ID {
			edited++
		}
	}
	if edited == 0 {
		t.Fatal("the status message was not edited")
	}

	// A moderator deletes it; the next change posts it again.
	if !e.fake.RemoveMessage(status.ID) {
		t.Fatal("no status message to remove")
	}
	e.llm.Reset()
	e.clock.Advance(2 * time.Hour)
	e.fake.SendMention("G1", "C3", "U1", "back?")
	// (A look between the deletion and the recovery may post it again still
	// saying all down; the recovery then edits that one.)
	_, err = e.fake.WaitMessages(boardWait, 1, func(m fakediscord.Message) bool {
		return isStatus(m) && m.ID != status.ID && !m.Deleted && !strings.Contains(m.Content, "All models are unavailable")
	})
	if err != nil {
		t.Fatalf("the deleted status message was not posted again showing the recovery: %v\n%s", err, e.logs.String())
	}
	if n := countStatus(e.fake); n != 1 {
		t.Errorf("%d status messages besides the deleted one, want the one posted again", n)
	}
}

func countStatus(s *fakediscord.Server) int {
	n := 0
	for _, m := range s.Messages() {
		if isStatus(m) && !m.Deleted {
			n++
		}
	}
	return n
}

// TestE2E_Issue38_StatusAllIsTheBoard: /status all answers the board, for the
// asker alone (ephemeral): an admin's with keys and spend, everyone else's
// with models and states only.
// covers issue 38
func TestE2E_Issue38_StatusAllIsTheBoard(t *testing.T) {
	e := newE2E(t)
	for _, who := range []string{"UADMIN", "U1"} {
		e.fake.SendCommand(fakediscord.Command{GuildID: "G1", ChannelID: "C1", UserID: who, Name: "status",
			Options: []fakediscord.Option{{Name: "scope", Value: "all"}}})
	}
	got, err := e.fake.WaitMessages(boardWait, 2, func(m fakediscord.Message) bool {
		return m.Via == "edit-original" && strings.HasPrefix(m.Content, "**detour health**")
	})
	if err != nil {
		t.Fatalf("no board answered: %v\n%s", err, e.logs.String())
	}
	var admin, user string
	for _, m := range got {
		if !m.Ephemeral {
			t.Errorf("/status all answered in public: %q", m.Content)
		}
		if strings.Contains(m.Content, "admin view") {
			admin = m.Content
		} else {
			user = m.Content
		}
	}
	if !strings.Contains(admin, "key `p1:main`") || !strings.Contains(admin, "**Today**") {
		t.Errorf("the admin's board lacks keys or spend:\n%s", admin)
	}
	if user == "" || strings.Contains(user, "p1:main") || strings.Contains(user, "Today") || !strings.Contains(user, "`p1/alpha` answering") {
		t.Errorf("everyone's board:\n%s", user)
	}
}
