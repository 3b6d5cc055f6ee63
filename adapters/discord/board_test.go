package discord

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/health"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

func downBoard(now time.Time, reason string) health.Board {
	return health.Board{Version: health.Version, At: now, Admin: true, Providers: []health.ProviderView{{Name: "p1", State: health.Down, Reason: reason,
		Models: []health.ModelView{{Ref: "p1/alpha", State: health.Down, Reason: reason}}}}}
}

// TestStatus_Issue38_FoundAfterRestart: a bot that restarted finds the status
// message it posted before (its own, among the channel's last messages) and
// edits it instead of posting another; a calm board posts nothing; shards
// other than 0 keep no status message.
// covers issue 38
func TestStatus_Issue38_FoundAfterRestart(t *testing.T) {
	h := start(t, nil)
	board := downBoard(t0, "timeout")
	h.a.SetBoard(func(context.Context, string) (health.Board, error) { return board, nil })
	h.a.SetStatusChannel("ADMIN")
	h.a.BoardChanged(context.Background())
	msgs, err := h.fake.WaitMessages(wait, 1, func(m fakediscord.Message) bool { return strings.HasPrefix(m.Content, statusPrefix) })
	if err != nil {
		t.Fatal(err)
	}
	first := msgs[0].ID

	// The restart: the adapter's memory is gone, the message is not.
	h.a.status.msgID, h.a.status.last = "", ""
	board = downBoard(t0, "overloaded")
	h.a.BoardChanged(context.Background())
	if m, _ := h.fake.Message(first); !strings.Contains(m.Content, "overloaded") {
		t.Fatalf("the earlier status message was not edited: %q", m.Content)
	}
	n := 0
	for _, m := range h.fake.Messages() {
		if strings.HasPrefix(m.Content, statusPrefix) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d status messages, want the one found again", n)
	}
}

// TestStatus_Issue38_QuietWhenCalm: nothing is posted while every provider
// answers; only shard 0 keeps the status message.
// covers issue 38
func TestStatus_Issue38_QuietWhenCalm(t *testing.T) {
	h := start(t, nil)
	calmBoard := health.Board{Version: health.Version, At: t0, Providers: []health.ProviderView{{Name: "p1", State: health.Answering,
		Models: []health.ModelView{{Ref: "p1/alpha", State: health.Answering}}}}}
	h.a.SetBoard(func(context.Context, string) (health.Board, error) { return calmBoard, nil })
	h.a.SetStatusChannel("ADMIN")
	h.a.BoardChanged(context.Background())
	if n := len(h.fake.Messages()); n != 0 {
		t.Fatalf("a calm board posted %d messages", n)
	}
	other, err := New(Config{Token: canaryToken, ShardID: 1, ShardCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	other.SetStatusChannel("ADMIN")
	if other.status.channel.Load() != nil {
		t.Error("shard 1 keeps a status message too")
	}
}

// TestBoardText_Issue38_FitsOneMessage: the board is one Discord message of
// at most 2,000 characters, whatever its size.
// covers issue 38
func TestBoardText_Issue38_FitsOneMessage(t *testing.T) {
	b := downBoard(t0, "timeout")
	for i := range 300 {
		b.Providers[0].Models = append(b.Providers[0].Models, health.ModelView{Ref: strings.Repeat("m", 30) + string(rune('a'+i%26)), State: health.CoolingDown})
	}
	text := BoardText(b, MaxMessageLen)
	if n := textLen(text); n > MaxMessageLen || !strings.HasSuffix(text, "shows the whole board)") {
		t.Fatalf("%d characters, ends %q", n, text[len(text)-40:])
	}
}
