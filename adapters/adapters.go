// Package adapters defines the neutral message types every chat channel speaks and
// the Adapter interface the router drives. It imports nothing of the project.
package adapters

import (
	"context"
	"time"
)

// Kind is what an outbound message is; channels render each kind differently.
type Kind string

// Outbound kinds.
const (
	KindReply  Kind = "reply"  // assistant content; the only kind stored in history
	KindNotice Kind = "notice" // status message (fallback / cleared), its own message (N4)
	KindError  Kind = "error"  // a turn or command that failed, told to the user
	KindReport Kind = "report" // admin report (V4), sent to the admin channel
)

// Inbound is one message from a person.
type Inbound struct {
	Channel    string // adapter name: "console", "slack", "discord"
	SessionKey string // e.g. "slack:T1:C1:1712.0001", "discord:G1:C1", "console:default"
	User       string // channel-qualified user id: "slack:U123", "discord:456", "console:u1"
	Text       string
	ReplyTo    string // opaque to everyone but the adapter: where answers go
	Direct     bool   // a direct message (notices.users: direct_only)
	Native     bool   // arrived as a platform slash command / interaction
	Admin      bool   // the channel itself vouches the user is an admin (console)
	// EventID is the platform's own id of this event or message ("slack:Ev123",
	// "discord:msg:987"), so a replica or a restart answers it once (M3); "" = none.
	EventID string
	// DefaultsFor is set when SessionKey holds no conversation of its own but the
	// model that new conversations under it start with (a Slack channel, whose
	// threads are the sessions "<SessionKey>:<thread ts>"); it names them for the
	// answer, e.g. "new threads in #general".
	DefaultsFor string
}

// Outbound is one message to post.
type Outbound struct {
	Kind       Kind
	Channel    string // adapter name
	SessionKey string
	ReplyTo    string // copied from Inbound; for KindReport, the admin channel's target id
	Text       string
	Model      string // on replies: the "provider/model" that answered
	Ephemeral  bool   // visible only to the user where the platform allows (command answers)
}

// Adapter is one chat channel.
type Adapter interface {
	Name() string
	// Run receives messages until ctx ends or the channel closes, sending them to
	// inbox; it returns nil on a clean end (console: end of input).
	Run(ctx context.Context, inbox chan<- Inbound) error
	// Send posts one outbound message.
	Send(ctx context.Context, out Outbound) error
}

// Typer is an optional capability: show a typing indicator while a turn runs.
type Typer interface {
	Typing(ctx context.Context, in Inbound) error
}

// SessionLookup is an optional capability: an adapter that decides from its own
// memory whether a message continues a conversation (a Slack thread reply without
// a mention) is also told how to ask whether a session exists, so conversations
// carry on after a restart.
type SessionLookup interface {
	SetSessionLookup(known func(ctx context.Context, sessionKey string) bool)
}

// Sleep waits for d or until ctx ends, returning ctx.Err() when cut short.
// Adapters use it for the waits platforms ask for (rate limits, reconnects).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
