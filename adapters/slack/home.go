package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/health"
)

// The App Home tab shows the health board (issue 38): published with
// views.publish when a person opens it (app_home_opened) and again, for those
// who opened it lately, when the board changes. Admins see keys and spend,
// everyone else models and states: the board function decides (health.Build).
//
// Slack's limits (https://docs.slack.dev/reference/block-kit/blocks: "up to
// 100 blocks in modals or Home tabs"; a section's text at most 3,000
// characters, https://docs.slack.dev/reference/block-kit/blocks/section-block;
// a header's at most 150, https://docs.slack.dev/reference/block-kit/blocks/header-block;
// views.publish is Tier 4, 100+ per minute,
// https://docs.slack.dev/reference/methods/views.publish) are kept by
// construction: at most maxHomeProviders provider sections, every text cut to
// its limit, and every publish taken from the method's window (methodLimits).

const (
	maxHomeBlocks    = 100 // Home tab's block limit
	maxHeaderText    = 150 // a header block's plain_text
	maxHomeProviders = 80  // provider sections; the rest is one line
	maxHomeUsers     = 200 // people whose Home tab is refreshed on a change
	homeWatch        = 24 * time.Hour
	homeCallTimeout  = 10 * time.Second
)

// BoardFunc computes the board user (a "slack:U…" id) may see.
type BoardFunc = func(ctx context.Context, user string) (health.Board, error)

// home is the adapter's Home tab state.
type home struct {
	board atomic.Pointer[BoardFunc]
	mu    sync.Mutex
	seen  map[string]time.Time // user → when they last opened the tab
	last  map[string]string    // user → the blocks last published to them
}

// SetBoard gives the adapter the board its Home tab shows; without it the
// Home tab is left as Slack shows it.
func (a *Adapter) SetBoard(fn BoardFunc) {
	if fn == nil {
		return
	}
	a.home.board.Store(&fn)
}

// homeOpened publishes the board to the person who opened the Home tab.
func (a *Adapter) homeOpened(ctx context.Context, raw json.RawMessage) {
	var outer struct {
		EventID string `json:"event_id"`
		Event   struct {
			User string `json:"user"`
			Tab  string `json:"tab"`
		} `json:"event"`
	}
	if json.Unmarshal(raw, &outer) != nil || outer.Event.User == "" || (outer.Event.Tab != "" && outer.Event.Tab != "home") {
		return
	}
	if outer.EventID != "" && a.mem.seen.Seen("ev:"+outer.EventID) {
		return
	}
	user := outer.Event.User
	a.home.mu.Lock()
	if a.home.seen == nil {
		a.home.seen, a.home.last = map[string]time.Time{}, map[string]string{}
	}
	a.home.seen[user] = a.cfg.Now()
	a.forgetHomesLocked()
	delete(a.home.last, user) // opened: publish even when unchanged (a new device, a cleared view)
	a.home.mu.Unlock()
	a.background(ctx, func(ctx context.Context) { a.publishHome(ctx, user) })
}

// forgetHomesLocked keeps the people who opened the tab within homeWatch, at
// most maxHomeUsers of them, the latest.
func (a *Adapter) forgetHomesLocked() {
	now := a.cfg.Now()
	for u, at := range a.home.seen {
		if now.Sub(at) > homeWatch {
			delete(a.home.seen, u)
			delete(a.home.last, u)
		}
	}
	for len(a.home.seen) > maxHomeUsers {
		var oldest string
		for u, at := range a.home.seen {
			if oldest == "" || at.Before(a.home.seen[oldest]) {
				oldest = u
			}
		}
		delete(a.home.seen, oldest)
		delete(a.home.last, oldest)
	}
}

// BoardChanged publishes the board again to everyone who opened the Home tab
// lately and whose board changed, one after the other within views.publish's
// window; it returns when they are published or ctx ends.
func (a *Adapter) BoardChanged(ctx context.Context) {
	a.home.mu.Lock()
	a.forgetHomesLocked()
	users := make([]string, 0, len(a.home.seen))
	for u := range a.home.seen {
		users = append(users, u)
	}
	a.home.mu.Unlock()
	for _, u := range users {
		if ctx.Err() != nil {
			return
		}
		a.publishHome(ctx, u)
	}
}

// publishHome publishes user's board unless it is what they were last shown.
func (a *Adapter) publishHome(ctx context.Context, user string) {
	fn := a.home.board.Load()
	if fn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, homeCallTimeout)
	defer cancel()
	b, err := (*fn)(ctx, Name+":"+user) // the id admin.users names (slack:U…)
	if err != nil {
		a.log.Warn("slack: home tab: the board could not be read", "err", err)
		return
	}
	view := HomeView(b)
	blocks, _ := json.Marshal(view.Blocks)
	a.home.mu.Lock()
	same := a.home.last[user] == string(blocks)
	a.home.mu.Unlock()
	if same {
		return
	}
	err = a.limited(ctx, "views.publish", func(ctx context.Context) error {
		_, err := a.api.PublishViewContext(ctx, slackgo.PublishViewContextRequest{UserID: user, View: view})
		return err
	})
	if err != nil {
		a.log.Warn("slack: home tab not published", "user", user, "err", safeErr(err))
		return
	}
	a.home.mu.Lock()
	if _, ok := a.home.seen[user]; ok {
		a.home.last[user] = string(blocks)
	}
	a.home.mu.Unlock()
}

// HomeView renders the board as a Home tab view in Block Kit, within Slack's
// limits (at most 100 blocks, texts cut to their block's limit).
func HomeView(b health.Board) slackgo.HomeTabViewRequest {
	now := b.At
	var blocks []slackgo.Block
	section := func(text string) {
		blocks = append(blocks, slackgo.NewSectionBlock(slackgo.NewTextBlockObject(slackgo.MarkdownType, cut(text, maxSectionText), false, false), nil, nil))
	}
	header := func(text string) {
		blocks = append(blocks, slackgo.NewHeaderBlock(slackgo.NewTextBlockObject(slackgo.PlainTextType, truncateRunes(text, maxHeaderText), false, false)))
	}
	view := "everyone's view: models and states"
	if b.Admin {
		view = "admin view: keys and spend included"
	}
	header("detour health")
	blocks = append(blocks, slackgo.NewContextBlock("", slackgo.NewTextBlockObject(slackgo.MarkdownType,
		fmt.Sprintf("Updated %s · %s", health.Clock(b.At, now), view), false, false)))
	if b.AllDown != nil {
		s := ":rotating_light: *All models are unavailable*"
		if !b.AllDown.Since.IsZero() {
			s += fmt.Sprintf(" since %s (%s)", health.Clock(b.AllDown.Since, now), health.Span(now.Sub(b.AllDown.Since)))
		}
		section(s)
	}
	blocks = append(blocks, slackgo.NewDividerBlock())
	for i, p := range b.Providers {
		if i == maxHomeProviders {
			section(fmt.Sprintf("… and %d more providers (`bot status` shows them all)", len(b.Providers)-i))
			break
		}
		section(providerText(p, now))
	}
	blocks = append(blocks, slackgo.NewDividerBlock())
	header("Active fallbacks")
	var lines []string
	for _, f := range b.Fallbacks {
		l := fmt.Sprintf("• `%s` → `%s`", esc(f.From), esc(f.To))
		if f.Reason != "" {
			l += " (" + esc(health.Reason(f.Reason)) + ")"
		}
		l += ": " + health.Count(int64(f.Count), "session")
		if !f.Since.IsZero() {
			l += " since " + health.Clock(f.Since, now)
		}
		lines = append(lines, l)
	}
	section(orNone(lines, "_none_"))
	header("Last 24 hours")
	lines = lines[:0]
	for _, e := range b.Timeline {
		lines = append(lines, fmt.Sprintf("`%s` %s", health.Clock(e.At, now), esc(e.Line())))
	}
	if b.Omitted > 0 {
		lines = append(lines, fmt.Sprintf("_… %d earlier_", b.Omitted))
	}
	section(orNone(lines, "_nothing happened_"))
	if t := b.Today; t != nil {
		header("Today")
		lines = []string{fmt.Sprintf("*%d calls*, %d tokens in, %d out, *$%.2f* (%s UTC)", t.Calls, t.TokensIn, t.TokensOut, t.USD, t.Day)}
		for _, m := range t.Models {
			lines = append(lines, fmt.Sprintf("• `%s`: %d calls, $%.2f", esc(m.Model), m.Calls, m.USD))
		}
		section(strings.Join(lines, "\n"))
	}
	if len(blocks) > maxHomeBlocks { // cannot happen with maxHomeProviders; kept as the limit's guard
		blocks = blocks[:maxHomeBlocks]
	}
	return slackgo.HomeTabViewRequest{Type: slackgo.VTHomeTab, Blocks: slackgo.Blocks{BlockSet: blocks}}
}

// stateEmoji marks a state at a glance.
func stateEmoji(state string) string {
	switch state {
	case health.Answering:
		return ":large_green_circle:"
	case health.CoolingDown:
		return ":large_yellow_circle:"
	case health.Down:
		return ":red_circle:"
	}
	return ":no_entry:"
}

func providerText(p health.ProviderView, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s *%s* — %s", stateEmoji(p.State), esc(p.Name), health.Words(p.State))
	if d := p.Detail(now); d != "" {
		b.WriteString(" · " + esc(d))
	}
	for _, m := range p.Models {
		fmt.Fprintf(&b, "\n%s `%s` %s", stateEmoji(m.State), esc(m.Ref), health.Words(m.State))
		if d := m.Detail(now); d != "" {
			b.WriteString(" · " + esc(d))
		}
	}
	for _, k := range p.Keys {
		fmt.Fprintf(&b, "\n%s key `%s` %s", stateEmoji(k.State), esc(k.ID), health.Words(k.State))
		if d := k.Detail(now); d != "" {
			b.WriteString(" · " + esc(d))
		}
	}
	return b.String()
}

func orNone(lines []string, none string) string {
	if len(lines) == 0 {
		return none
	}
	return strings.Join(lines, "\n")
}

// cut bounds a section's text, ending in "…" when it was cut.
func cut(s string, n int) string {
	t := truncateRunes(s, n)
	if t != s {
		t = truncateRunes(s, n-1) + "…"
	}
	return t
}

// esc escapes the three characters Slack's mrkdwn takes as markup
// (https://docs.slack.dev/messaging/formatting-message-text/#escaping), so a
// name from the configuration or the database can ping or link no one.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
