package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/detourbot/detour/health"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// bigBoard is a board far past what one Home tab holds: 150 providers of 40
// models, a long timeline, names with mrkdwn markup.
func bigBoard(now time.Time) health.Board {
	b := health.Board{Version: health.Version, At: now, Admin: true}
	for i := range 150 {
		p := health.ProviderView{Name: fmt.Sprintf("prov<%d>&", i), State: health.CoolingDown, Reason: "rate_limit"}
		for j := range 40 {
			p.Models = append(p.Models, health.ModelView{Ref: fmt.Sprintf("prov%d/a-very-long-model-name-%d", i, j), State: health.CoolingDown,
				Until: now.Add(time.Minute), Reason: "rate_limit"})
		}
		b.Providers = append(b.Providers, p)
	}
	for i := range health.MaxEvents {
		b.Timeline = append(b.Timeline, health.Event{At: now.Add(-time.Duration(i) * time.Minute), Kind: health.FallbackStarted,
			From: strings.Repeat("x", 200), To: "<!channel>", Count: 3})
	}
	return b
}

// TestHomeView_Issue38_WithinSlackLimits: whatever the board, the Home tab
// holds at most 100 blocks, headers of at most 150 characters and sections of
// at most 3,000, and names cannot ping anyone; the fake Slack accepts it.
// covers issue 38
func TestHomeView_Issue38_WithinSlackLimits(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	v := HomeView(bigBoard(now))
	if n := len(v.Blocks.BlockSet); n > fakeslack.MaxViewBlocks {
		t.Fatalf("%d blocks, Slack takes %d", n, fakeslack.MaxViewBlocks)
	}
	js, _ := v.Blocks.MarshalJSON()
	if strings.Contains(string(js), "<!channel>") || strings.Contains(string(js), "prov<") {
		t.Error("a name's markup reached the view unescaped")
	}
	h := start(t, nil)
	h.a.SetBoard(func(context.Context, string) (health.Board, error) { return bigBoard(now), nil })
	h.srv.AppHomeOpened("U1")
	got, ok := h.srv.WaitHome("U1", wait, nil)
	if !ok {
		t.Fatalf("the fake refused the view: %+v", h.srv.CallLog())
	}
	for _, b := range got.Blocks {
		if txt, _ := b["text"].(map[string]any); txt != nil {
			s, _ := txt["text"].(string)
			if limit := map[string]int{"header": 150, "section": 3000}[b["type"].(string)]; limit > 0 && utf8.RuneCountInString(s) > limit {
				t.Errorf("%s of %d characters", b["type"], utf8.RuneCountInString(s))
			}
		}
	}
	if !strings.Contains(got.Text(), "more providers") {
		t.Error("the providers past the limit are not summed up")
	}
}

// TestHomeView_Issue38_AsTheReadmeShowsIt: the Block Kit view in README.md is
// what the Home tab publishes for the health package's outage fixture.
// covers issue 38
func TestHomeView_Issue38_AsTheReadmeShowsIt(t *testing.T) {
	data, err := os.ReadFile("../../health/testdata/outage.user.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var b health.Board
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(HomeView(b), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```json\n"+string(js)+"\n```") {
		t.Errorf("README.md's Home tab example differs from HomeView's output:\n%s", js)
	}
}
