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
	// Files are the files sent with the message (I1-I4): read through the
	// adapter's FileReader when the turn needs them.
	Files []File
	// Earlier is set when the bot is addressed for the first time in a
	// conversation that began without it (a Slack thread it did not start, a
	// Discord thread): where the conversation's earlier messages can be read
	// through the adapter's HistoryReader (H1). Opaque to everyone but the
	// adapter; "" = nothing to read.
	Earlier string
	// RepliesTo is set when the message answers earlier messages of its
	// channel (a Discord reply chain): where that chain can be read, for this
	// message only (H1). Opaque like Earlier.
	RepliesTo string
	// Conversation is the kind of place the message came from
	// (ConversationDirect, ConversationGroup, ConversationChannel), as
	// access.direct_messages sees it (T5); "" = as Direct says.
	Conversation string
	// Parent is the session key of the channel a thread belongs to
	// ("discord:G1:C1" for a message in the thread "discord:G1:T7"), so that
	// access.channels allows the threads of an allowed channel (T5); "" outside
	// a thread, or when the adapter does not know it.
	Parent string
	// Replay asks, when EventID was answered before, for that stored answer
	// again (marked Outbound.Replayed) rather than silence: set where the
	// sender chose the id and sends a message again because it missed the
	// answer (the console's "id", M7). Platforms leave it false: their
	// redelivery of an event already answered and delivered is dropped (M3).
	Replay bool
}

// Conversation kinds (Inbound.Conversation).
const (
	// ConversationDirect is a direct message between one person and the bot.
	ConversationDirect = "direct"
	// ConversationGroup is a direct message among several people and the bot
	// (a Slack group DM, "mpim"): a direct message for access.direct_messages.
	ConversationGroup = "group_direct"
	// ConversationChannel is a channel, public or private, or a thread of one.
	ConversationChannel = "channel"
)

// Outbound is one message to post.
type Outbound struct {
	Kind       Kind
	Channel    string // adapter name
	SessionKey string
	ReplyTo    string // copied from Inbound; for KindReport, the admin channel's target id
	Text       string
	Model      string // on replies: the "provider/model" that answered
	Ephemeral  bool   // visible only to the user where the platform allows (command answers)
	// Replayed marks an answer given before and sent again for a message sent
	// again with the same id (Inbound.Replay, M7); no model was called for it.
	Replayed bool
	// Choices offers a pick (L4: /model without an argument). An adapter that
	// can show a select menu shows one beside Text and sends the person's pick
	// back as an Inbound whose Text is the choice's Command; others show Text.
	Choices []Choice
}

// Choice is one option of a picker.
type Choice struct {
	Label   string // what the person sees: "anthropic/claude-haiku-4-5"
	Command string // what choosing it says: "/model anthropic/claude-haiku-4-5"
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

// Connector is an optional capability of an adapter that holds a connection to
// its platform (a Slack socket, a Discord gateway): Connected reports whether it
// is up now. The bot logs "ready" only once every such adapter is connected, and
// a readiness probe fails while one is not.
type Connector interface {
	Connected() bool
}

// Progress is an optional capability: show that the bot is working on a message
// (L1): Slack's assistant thread status, Discord's typing indicator, a console
// status line. The router starts it when a turn starts and stops it before the
// answer; the adapter refreshes it as its platform needs. Progress is
// fire-and-forget: StartProgress and every Indicator method return at once and
// never fail the turn; the adapter does its network calls on its own goroutine
// and drops them under rate limits.
type Progress interface {
	StartProgress(ctx context.Context, in Inbound) Indicator
}

// Indicator is one running progress display.
type Indicator interface {
	// Status replaces the status text ("is thinking…", "waiting 20 s for
	// openai: rate limit").
	Status(text string)
	// Stop clears the display. It is safe to call more than once.
	Stop()
}

// Streamer is an optional capability: post a reply that grows as the model
// writes it (L2), and that can be replaced in place when the attempt that wrote
// it fails and another model answers (L3). Without it the router posts the
// whole answer once.
type Streamer interface {
	// StartStream prepares a growing reply to in. Nothing needs to show until
	// the first Update. It must return at once, without a platform call: it
	// is called from the LLM client's stream, under the message's writer,
	// whose other calls wait for it.
	StartStream(ctx context.Context, in Inbound) (Stream, error)
}

// Stream is one growing reply.
type Stream interface {
	// Update shows text as the reply so far. text is the whole current text,
	// not a delta: when it does not extend what was shown (a failed attempt's
	// partial text replaced by a fallback's), the shown text is replaced. The
	// adapter throttles and may show it later or partly; it must not block on
	// the platform's rate limits.
	Update(ctx context.Context, text string) error
	// Restart takes down what the stream shows (a failed attempt's text) and,
	// when lead is not nil, posts lead as a message of its own before any text
	// that follows: the fallback notice above the fallback's answer (A5). Like
	// Update, it does not wait for the platform.
	Restart(ctx context.Context, lead *Outbound) error
	// Finish replaces what was shown with the final message (the complete
	// answer, or an error) and ends the stream; no text may be left that is
	// not part of final. When the platform refused to stream, Finish posts
	// final as one message.
	Finish(ctx context.Context, final Outbound) error
}

// SessionLookup is an optional capability: an adapter that decides from its own
// memory whether a message continues a conversation (a Slack thread reply without
// a mention) is also told how to ask whether a session exists, so conversations
// carry on after a restart.
type SessionLookup interface {
	SetSessionLookup(known func(ctx context.Context, sessionKey string) bool)
}

// AccessFilter is an optional capability: an adapter that reads earlier
// messages (HistoryReader) and sees more of who stands behind a message than
// its author (a bot's answer to a person's command, a message posted through
// a webhook) is told who may talk to the bot (access.users with admin.users,
// T5), so it leaves out what people it refuses had posted for them (H4).
// mayTalk takes a channel-qualified user ("discord:456"); nil means
// access.users is empty: everyone may.
type AccessFilter interface {
	SetAccess(mayTalk func(user string) bool)
}

// Sleep waits for d or until ctx ends, returning ctx.Err() when cut short.
// Adapters use it for the waits platforms ask for (rate limits, reconnects).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-time.After(d): // collected once it fires or is dropped (Go 1.23)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Prober is an optional capability of a channel that talks to a platform: check,
// with the smallest requests the platform offers and without posting anything,
// that its credentials work and that target (an id of its own, such as the
// admin channel's; "" = none) can be reached. `bot check --probe` calls it.
type Prober interface {
	Probe(ctx context.Context, target string) []ProbeResult
}

// ProbeResult is one check: what was tried, whether it works, and a short
// detail (who the bot is, or why it failed). It never holds a secret.
type ProbeResult struct {
	What   string
	OK     bool
	Detail string
}

// Checked is one check's result: failed with err's text, or OK with detail
// (asked only then).
func Checked(what string, err error, detail func() string) ProbeResult {
	if err != nil {
		return ProbeResult{What: what, Detail: err.Error()}
	}
	return ProbeResult{What: what, OK: true, Detail: detail()}
}
