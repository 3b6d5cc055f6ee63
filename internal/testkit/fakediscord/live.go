package fakediscord

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Discord's limits on what a message may hold.
// https://discord.com/developers/docs/resources/message#create-message
// https://discord.com/developers/docs/components/reference#action-row
// https://discord.com/developers/docs/components/reference#string-select
const (
	maxContent        = 2000
	maxRows           = 5
	maxRowComponents  = 5
	maxCustomID       = 100
	maxSelectOptions  = 25
	maxOptionText     = 100 // label, value, description
	maxPlaceholder    = 150
	maxThreadName     = 100
	componentRow      = 1
	componentButton   = 2
	componentSelect   = 3
	interactionButton = 3 // interaction type of a message component
)

// autoArchive lists the auto_archive_duration values Discord accepts, in minutes.
// https://discord.com/developers/docs/resources/channel#start-thread-from-message
var autoArchive = []int{60, 1440, 4320, 10080}

var errEmptyMessage = errors.New("fakediscord: cannot send an empty message")

// Select is a string select menu (component type 3) in a message.
type Select struct {
	CustomID    string
	Placeholder string
	MinValues   int
	MaxValues   int
	Options     []SelectOption
}

// SelectOption is one option of a Select.
type SelectOption struct {
	Label, Value, Description string
	Default                   bool
}

// Edit is one accepted edit of a message: PATCH /channels/{c}/messages/{m}, an
// interaction webhook's PATCH of a message that exists, or callback type 7.
type Edit struct {
	MessageID string
	ChannelID string  // "" for a message posted through an interaction webhook
	Content   *string // nil: the content was not changed
	// Components is true when the edit set the components; Selects are then the
	// new select menus (none: the components were removed).
	Components           bool
	Selects              []Select
	AllowedMentionsParse *[]string
	LiveMentions         []string
	Via                  string // "channel", "webhook", "callback"
	At                   time.Time
}

// Delete is one accepted DELETE /channels/{c}/messages/{m}.
type Delete struct {
	MessageID, ChannelID string
	At                   time.Time
}

// ThreadStart is one accepted POST /channels/{c}/messages/{m}/threads.
type ThreadStart struct {
	ParentID, MessageID, ThreadID, Name string
	AutoArchiveDuration                 int // 0 = not given (Discord's default, 24 h)
	At                                  time.Time
}

// Typing is one POST /channels/{c}/typing.
type Typing struct {
	ChannelID string
	At        time.Time
}

// Component describes a MESSAGE_COMPONENT interaction to dispatch: a person
// picking Values in the select menu CustomID of message MessageID.
type Component struct {
	GuildID   string // "" for a DM
	ChannelID string
	UserID    string
	MessageID string
	CustomID  string
	Values    []string
}

func (m Message) clone() Message {
	m.Versions = slices.Clone(m.Versions)
	m.LiveMentions = slices.Clone(m.LiveMentions)
	m.Selects = cloneSelects(m.Selects)
	if m.AllowedMentionsParse != nil {
		p := slices.Clone(*m.AllowedMentionsParse)
		m.AllowedMentionsParse = &p
	}
	return m
}

func cloneSelects(ss []Select) []Select {
	out := slices.Clone(ss)
	for i := range out {
		out[i].Options = slices.Clone(out[i].Options)
	}
	return out
}

// rawComponent is a component as sent; only the fields the fake checks.
type rawComponent struct {
	Type        int             `json:"type"`
	CustomID    string          `json:"custom_id"`
	Placeholder string          `json:"placeholder"`
	MinValues   *int            `json:"min_values"`
	MaxValues   *int            `json:"max_values"`
	RawOptions  json.RawMessage `json:"options"`
	Components  []rawComponent  `json:"components"`
}

// parseComponents checks a message's components against Discord's limits and
// returns its select menus. Only action rows holding string selects or buttons
// are accepted (all detour sends).
func parseComponents(raw json.RawMessage) ([]Select, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var rows []rawComponent
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("components: %v", err)
	}
	if len(rows) > maxRows {
		return nil, fmt.Errorf("components: at most %d action rows (%d)", maxRows, len(rows))
	}
	var out []Select
	ids := map[string]bool{}
	for i, row := range rows {
		if row.Type != componentRow {
			return nil, fmt.Errorf("components.%d: top-level components must be action rows (type 1), not %d", i, row.Type)
		}
		if len(row.Components) == 0 || len(row.Components) > maxRowComponents {
			return nil, fmt.Errorf("components.%d.components: an action row holds 1 to %d components (%d)", i, maxRowComponents, len(row.Components))
		}
		for j, c := range row.Components {
			at := fmt.Sprintf("components.%d.components.%d", i, j)
			if c.CustomID == "" || len([]rune(c.CustomID)) > maxCustomID {
				return nil, fmt.Errorf("%s.custom_id: 1 to %d characters", at, maxCustomID)
			}
			if ids[c.CustomID] {
				return nil, fmt.Errorf("%s.custom_id: %q is used twice in the message", at, c.CustomID)
			}
			ids[c.CustomID] = true
			switch c.Type {
			case componentButton:
			case componentSelect:
				if len(row.Components) != 1 {
					return nil, fmt.Errorf("%s: a select menu must be alone in its action row", at)
				}
				sel, err := parseSelect(at, c)
				if err != nil {
					return nil, err
				}
				out = append(out, sel)
			default:
				return nil, fmt.Errorf("%s.type: component type %d is not supported by the fake", at, c.Type)
			}
		}
	}
	return out, nil
}

func parseSelect(at string, c rawComponent) (Select, error) {
	var opts []struct {
		Label       *string `json:"label"`
		Value       string  `json:"value"`
		Description string  `json:"description"`
		Default     bool    `json:"default"`
	}
	if err := json.Unmarshal(c.RawOptions, &opts); err != nil || len(opts) == 0 || len(opts) > maxSelectOptions {
		return Select{}, fmt.Errorf("%s.options: a string select has 1 to %d options (%d)", at, maxSelectOptions, len(opts))
	}
	if n := len([]rune(c.Placeholder)); n > maxPlaceholder {
		return Select{}, fmt.Errorf("%s.placeholder: at most %d characters (%d)", at, maxPlaceholder, n)
	}
	sel := Select{CustomID: c.CustomID, Placeholder: c.Placeholder, MinValues: 1, MaxValues: 1}
	if c.MinValues != nil {
		sel.MinValues = *c.MinValues
	}
	if c.MaxValues != nil {
		sel.MaxValues = *c.MaxValues
	}
	if sel.MinValues < 0 || sel.MinValues > maxSelectOptions || sel.MaxValues < 1 || sel.MaxValues > len(opts) || sel.MinValues > sel.MaxValues {
		return Select{}, fmt.Errorf("%s: min_values %d / max_values %d out of range for %d options", at, sel.MinValues, sel.MaxValues, len(opts))
	}
	values := map[string]bool{}
	for k, o := range opts {
		oat := fmt.Sprintf("%s.options.%d", at, k)
		if o.Label == nil || *o.Label == "" || len([]rune(*o.Label)) > maxOptionText {
			return Select{}, fmt.Errorf("%s.label: 1 to %d characters", oat, maxOptionText)
		}
		if o.Value == "" || len([]rune(o.Value)) > maxOptionText {
			return Select{}, fmt.Errorf("%s.value: 1 to %d characters", oat, maxOptionText)
		}
		if len([]rune(o.Description)) > maxOptionText {
			return Select{}, fmt.Errorf("%s.description: at most %d characters", oat, maxOptionText)
		}
		if values[o.Value] {
			return Select{}, fmt.Errorf("%s.value: %q is used twice", oat, o.Value)
		}
		values[o.Value] = true
		sel.Options = append(sel.Options, SelectOption{Label: *o.Label, Value: o.Value, Description: o.Description, Default: o.Default})
	}
	return sel, nil
}

func selectsJSON(ss []Select) []any {
	rows := make([]any, 0, len(ss))
	for _, sel := range ss {
		opts := make([]any, 0, len(sel.Options))
		for _, o := range sel.Options {
			opts = append(opts, map[string]any{"label": o.Label, "value": o.Value, "description": o.Description, "default": o.Default})
		}
		rows = append(rows, map[string]any{"type": componentRow, "components": []any{map[string]any{
			"type": componentSelect, "custom_id": sel.CustomID, "placeholder": sel.Placeholder,
			"min_values": sel.MinValues, "max_values": sel.MaxValues, "options": opts,
		}}})
	}
	return rows
}

// editBody is an edit request: absent fields leave the message as it is.
type editBody struct {
	Content         *string          `json:"content"`
	AllowedMentions *allowedMentions `json:"allowed_mentions"`
	Components      json.RawMessage  `json:"components"`
	Flags           int              `json:"flags"`
}

// post is the edit as a first post (an interaction's original response).
func (b editBody) post() postBody {
	p := postBody{AllowedMentions: b.AllowedMentions, Components: b.Components, Flags: b.Flags}
	if b.Content != nil {
		p.Content = *b.Content
	}
	return p
}

func (s *Server) channelOf(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.where[id]
}

// discardWriter takes a response nobody reads (an edit made by a callback).
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// handleMessageEdit is PATCH /channels/{c}/messages/{m}.
// https://discord.com/developers/docs/resources/message#edit-message
func (s *Server) handleMessageEdit(w http.ResponseWriter, r *http.Request) {
	var b editBody
	if err := readBody(r, &b); err != nil {
		badRequest(w, err)
		return
	}
	ch, id := r.PathValue("id"), r.PathValue("mid")
	s.mu.Lock()
	where, known := s.where[id], s.known[id]
	s.mu.Unlock()
	if where != ch {
		discordError(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	if known != s.BotID {
		discordError(w, http.StatusForbidden, 50005, "Cannot edit a message authored by another user")
		return
	}
	s.applyEdit(w, id, ch, b, "channel")
}

// applyEdit edits the bot's message id (in channel, "" for a webhook message).
func (s *Server) applyEdit(w http.ResponseWriter, id, channel string, b editBody, via string) {
	if b.Content != nil && len([]rune(*b.Content)) > maxContent {
		invalidForm(w, fmt.Errorf("content must be 2000 or fewer in length (%d)", len([]rune(*b.Content))))
		return
	}
	var selects []Select
	if b.Components != nil {
		var err error
		if selects, err = parseComponents(b.Components); err != nil {
			invalidForm(w, err)
			return
		}
	}
	s.mu.Lock()
	i, ok := s.byID[id]
	if !ok || s.messages[i].Deleted {
		s.mu.Unlock()
		discordError(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	m := &s.messages[i]
	content, sels := m.Content, m.Selects
	if b.Content != nil {
		content = *b.Content
	}
	if b.Components != nil {
		sels = selects
	}
	if content == "" && len(sels) == 0 {
		s.mu.Unlock()
		discordError(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return
	}
	e := Edit{MessageID: id, ChannelID: channel, Components: b.Components != nil, Selects: cloneSelects(selects), Via: via, At: time.Now()}
	if b.Content != nil {
		c := *b.Content
		e.Content = &c
		e.LiveMentions = liveMentions(c, b.AllowedMentions, false, "")
		if c != m.Content {
			m.Versions = append(m.Versions, c)
		}
	}
	if b.AllowedMentions != nil {
		p := append([]string{}, b.AllowedMentions.Parse...)
		e.AllowedMentionsParse = &p
	}
	m.Content, m.Selects = content, sels
	s.edits = append(s.edits, e)
	out := m.clone()
	echo := s.EchoOwnMessages && channel != ""
	guild := s.channels[channel].guildID
	s.mu.Unlock()
	s.answerMessage(w, out, "MESSAGE_UPDATE", echo, guild)
}

// handleMessageDelete is DELETE /channels/{c}/messages/{m}: the bot may delete its
// own messages (others need MANAGE_MESSAGES, which the fake's bot lacks).
// https://discord.com/developers/docs/resources/message#delete-message
func (s *Server) handleMessageDelete(w http.ResponseWriter, r *http.Request) {
	ch, id := r.PathValue("id"), r.PathValue("mid")
	s.mu.Lock()
	i, mine := s.byID[id]
	switch {
	case s.where[id] != ch || (mine && s.messages[i].Deleted):
		s.mu.Unlock()
		discordError(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	case !mine:
		s.mu.Unlock()
		discordError(w, http.StatusForbidden, 50013, "Missing Permissions")
		return
	}
	s.messages[i].Deleted = true
	s.deletes = append(s.deletes, Delete{MessageID: id, ChannelID: ch, At: time.Now()})
	echo := s.EchoOwnMessages
	guild := s.channels[ch].guildID
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	if echo {
		body := map[string]any{"id": id, "channel_id": ch}
		if guild != "" {
			body["guild_id"] = guild
		}
		s.Dispatch("MESSAGE_DELETE", body)
	}
}

// handleThreadFromMessage is POST /channels/{c}/messages/{m}/threads: a public
// thread whose id is the message's, in a guild text channel, once per message.
// https://discord.com/developers/docs/resources/channel#start-thread-from-message
func (s *Server) handleThreadFromMessage(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name                string `json:"name"`
		AutoArchiveDuration int    `json:"auto_archive_duration"`
		RateLimitPerUser    int    `json:"rate_limit_per_user"`
	}
	if err := readBody(r, &b); err != nil {
		badRequest(w, err)
		return
	}
	ch, id := r.PathValue("id"), r.PathValue("mid")
	if n := len([]rune(b.Name)); strings.TrimSpace(b.Name) == "" || n > maxThreadName {
		invalidForm(w, fmt.Errorf("name: 1 to %d characters (%d)", maxThreadName, n))
		return
	}
	if b.AutoArchiveDuration != 0 && !slices.Contains(autoArchive, b.AutoArchiveDuration) {
		invalidForm(w, fmt.Errorf("auto_archive_duration: one of %v, not %d", autoArchive, b.AutoArchiveDuration))
		return
	}
	if b.RateLimitPerUser < 0 || b.RateLimitPerUser > 21600 {
		invalidForm(w, fmt.Errorf("rate_limit_per_user: 0 to 21600"))
		return
	}
	s.mu.Lock()
	ci, known := s.channels[ch]
	switch {
	case !known:
		s.mu.Unlock()
		discordError(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	case ci.typ != 0 && ci.typ != 5: // guild text or announcement channels only
		s.mu.Unlock()
		discordError(w, http.StatusBadRequest, 50024, "Cannot execute action on this channel type")
		return
	case s.where[id] != ch || s.deletedLocked(id):
		s.mu.Unlock()
		discordError(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	case s.threadOf[id] != "":
		s.mu.Unlock()
		discordError(w, http.StatusBadRequest, 160004, "A thread has already been created for this message")
		return
	}
	thread := id // Discord gives the thread the id of the message it starts from
	s.threadOf[id] = thread
	s.channels[thread] = channelInfo{typ: 11, guildID: ci.guildID, parentID: ch}
	s.threadStarts = append(s.threadStarts, ThreadStart{ParentID: ch, MessageID: id, ThreadID: thread, Name: b.Name,
		AutoArchiveDuration: b.AutoArchiveDuration, At: time.Now()})
	s.mu.Unlock()
	archive := b.AutoArchiveDuration
	if archive == 0 {
		archive = 1440
	}
	body := map[string]any{
		"id": thread, "type": 11, "guild_id": ci.guildID, "parent_id": ch, "owner_id": s.BotID, "name": b.Name,
		"thread_metadata": map[string]any{"archived": false, "auto_archive_duration": archive, "locked": false},
	}
	writeJSON(w, http.StatusCreated, body)
	ev := map[string]any{"newly_created": true}
	for k, v := range body {
		ev[k] = v
	}
	s.Dispatch("THREAD_CREATE", ev)
}

func (s *Server) deletedLocked(id string) bool {
	i, ok := s.byID[id]
	return ok && s.messages[i].Deleted
}

// SendComponent dispatches a MESSAGE_COMPONENT interaction: user picks values in
// the select menu customID of message messageID, as Discord's client allows
// (an unknown message or menu, or values not among its options, is an error: the
// client cannot send them). It returns the interaction id and token.
// https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object
func (s *Server) SendComponent(c Component) (id, token string, err error) {
	s.mu.Lock()
	i, ok := s.byID[c.MessageID]
	if !ok || s.messages[i].Deleted {
		s.mu.Unlock()
		return "", "", fmt.Errorf("fakediscord: no message %s to pick from", c.MessageID)
	}
	m := s.messages[i].clone()
	var sel *Select
	for k := range m.Selects {
		if m.Selects[k].CustomID == c.CustomID {
			sel = &m.Selects[k]
		}
	}
	if sel == nil {
		s.mu.Unlock()
		return "", "", fmt.Errorf("fakediscord: message %s has no select menu %q", c.MessageID, c.CustomID)
	}
	if len(c.Values) < sel.MinValues || len(c.Values) > sel.MaxValues {
		s.mu.Unlock()
		return "", "", fmt.Errorf("fakediscord: %d values picked, the menu allows %d to %d", len(c.Values), sel.MinValues, sel.MaxValues)
	}
	for _, v := range c.Values {
		if !slices.ContainsFunc(sel.Options, func(o SelectOption) bool { return o.Value == v }) {
			s.mu.Unlock()
			return "", "", fmt.Errorf("fakediscord: %q is not an option of menu %q", v, c.CustomID)
		}
	}
	id = s.newID()
	token = "itok-" + id
	in := &interaction{id: id, token: token, dispatched: time.Now(), issued: s.Now(), typ: interactionButton, message: m.ID, ephemeral: m.Ephemeral}
	s.interactions[id], s.tokens[token] = in, in
	s.mu.Unlock()
	msg := s.messageJSON(m)
	if m.ChannelID == "" {
		msg["channel_id"] = c.ChannelID
	}
	user := map[string]any{"id": c.UserID, "username": "user-" + c.UserID}
	body := map[string]any{
		"id": id, "application_id": s.AppID, "type": interactionButton, "token": token, "version": 1,
		"channel_id": c.ChannelID, "message": msg,
		"data": map[string]any{"custom_id": c.CustomID, "component_type": componentSelect, "values": c.Values},
	}
	if c.GuildID != "" {
		body["guild_id"] = c.GuildID
		body["member"] = map[string]any{"user": user}
	} else {
		body["user"] = user
	}
	s.Dispatch("INTERACTION_CREATE", body)
	return id, token, nil
}

// ---- route buckets ----

type limit struct {
	method string
	segs   []string
	route  string
	n      int
	per    time.Duration
}

type bucket struct {
	used  int
	reset time.Time
}

// Limit gives route ("PATCH /channels/{id}/messages/{mid}") a bucket of n
// requests per window, per top-level resource (channel, guild, webhook), on the
// Now clock: every answer carries the X-RateLimit-* headers, and a request past n
// in a window gets a per-route 429, as Discord does.
// https://discord.com/developers/docs/topics/rate-limits#header-format
func (s *Server) Limit(route string, n int, per time.Duration) {
	method, path, _ := strings.Cut(route, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, limit{method: method, segs: splitRoute(path), route: route, n: n, per: per})
}

// takeLimit counts a request against its route's bucket, writing the headers; it
// answers a 429 and returns false when the bucket is empty.
func (s *Server) takeLimit(w http.ResponseWriter, method, path string) bool {
	segs := splitRoute(path)
	s.mu.Lock()
	var l *limit
	for i := range s.limits {
		if matchRoute(fault{method: s.limits[i].method, segs: s.limits[i].segs}, method, segs) {
			l = &s.limits[i]
			break
		}
	}
	if l == nil {
		s.mu.Unlock()
		return true
	}
	major := ""
	if len(segs) > 1 {
		major = segs[1]
	}
	key := l.route + "|" + major
	now := s.Now()
	b := s.buckets[key]
	if b == nil || !now.Before(b.reset) {
		b = &bucket{reset: now.Add(l.per)}
		s.buckets[key] = b
	}
	left := b.reset.Sub(now)
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(l.n))
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(b.reset.UnixMilli())/1000, 'f', 3, 64))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(left.Seconds(), 'f', 3, 64))
	h.Set("X-RateLimit-Bucket", "limit-"+strings.NewReplacer(" ", "-", "/", "-", "{", "", "}", "").Replace(l.route))
	if b.used >= l.n {
		s.limited++
		s.mu.Unlock()
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Scope", "user")
		h.Set("Retry-After", strconv.Itoa(int(left.Seconds()+0.999)))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": left.Seconds(), "global": false})
		return false
	}
	b.used++
	h.Set("X-RateLimit-Remaining", strconv.Itoa(l.n-b.used))
	s.mu.Unlock()
	return true
}

// ---- recordings ----

// Edits returns every accepted message edit, in order.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.edits)
	for i := range out {
		out[i].Selects = cloneSelects(out[i].Selects)
	}
	return out
}

// Deletes returns every accepted message deletion, in order.
func (s *Server) Deletes() []Delete {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deletes)
}

// ThreadStarts returns every thread started from a message, in order.
func (s *Server) ThreadStarts() []ThreadStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.threadStarts)
}

// TypingCalls returns every typing indicator call with when it arrived.
func (s *Server) TypingCalls() []Typing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.typingCalls)
}

// Latest returns what a person sees in channel now: the bot's messages there that
// are not deleted, in order, each in its latest version.
func (s *Server) Latest(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if m.Via == "channel" && m.ChannelID == channel && !m.Deleted {
			out = append(out, m.clone())
		}
	}
	return out
}

// Message returns the bot's message id in its latest version.
func (s *Server) Message(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.byID[id]
	if !ok {
		return Message{}, false
	}
	return s.messages[i].clone(), true
}
