package fakediscord

// Reading messages back, and attachments.
//
//   - GET /channels/{c}/messages returns the channel's messages newest first:
//     limit 1 to 100 (default 50; else 400 code 50035), before, after or
//     around a message id (only one of them). GET /channels/{c}/messages/{m}
//     returns one, with referenced_message when it is a reply; an unknown one
//     is 404 code 10008. Both need Read Message History in the channel (403
//     code 50001 "Missing Access" where NoHistory says it is missing).
//     https://discord.com/developers/docs/resources/message#get-channel-messages
//   - Without the MESSAGE_CONTENT intent, content, attachments and embeds are
//     empty in every API's messages, REST reads included, except the bot's own,
//     those that mention it and DMs.
//     https://discord.com/developers/docs/events/gateway#message-content-intent
//   - A reply is a message of type 19 with a message_reference, and the
//     gateway's MESSAGE_CREATE carries the referenced_message.
//     https://discord.com/developers/docs/resources/message#message-reference-types
//   - Attachments live on the CDN at signed URLs: ex (expiry, hex unix time),
//     is (issued) and hm (signature); one without a valid signature, or past
//     its expiry on the Now clock, gets 404 "This content is no longer
//     available." The CDN takes no token: CDNRequests records each request
//     with the Authorization header it carried, so a test sees the bot token
//     never goes there. https://discord.com/developers/docs/reference#signed-attachment-cdn-urls
//
// The fake serves its CDN under /attachments on its own address (the adapter
// reaches the real one at cdn.discordapp.com).

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
)

// said is one message of a person, kept for reading back.
type said struct {
	id, channel, guild string
	author             map[string]any
	content            string
	reference          string // the replied-to message ("" = none)
	mentionsBot        bool
	attachments        []map[string]any
	at                 time.Time
	webhook, invoker   string // webhook_id, interaction_metadata.user ("" = none)
}

// attachment is one file on the CDN.
type attachment struct {
	id, channel, name, mime string
	data                    []byte
	size                    int64
}

// CDNRequest is one request that reached the CDN.
type CDNRequest struct {
	Path          string
	Authorization string // as it arrived ("" = none)
	Status        int
}

// attachmentTTL is how long a signed URL lives (Discord: 24 hours).
const attachmentTTL = 24 * time.Hour

// AddAttachment puts data on the CDN and returns its attachment object, for
// Msg.Attachments.
func (s *Server) AddAttachment(channel, name, mime string, data []byte) map[string]any {
	return s.addAttachment(&attachment{channel: channel, name: name, mime: mime, data: data, size: int64(len(data))})
}

// AddLargeAttachment puts a file of size bytes on the CDN, made as they are
// sent.
func (s *Server) AddLargeAttachment(channel, name, mime string, size int64) map[string]any {
	return s.addAttachment(&attachment{channel: channel, name: name, mime: mime, size: size})
}

func (s *Server) addAttachment(at *attachment) map[string]any {
	s.mu.Lock()
	at.id = s.newID()
	if s.cdn == nil {
		s.cdn = map[string]*attachment{}
	}
	s.cdn[at.id] = at
	now := s.Now()
	s.mu.Unlock()
	ex := strconv.FormatInt(now.Add(attachmentTTL).Unix(), 16)
	is := strconv.FormatInt(now.Unix(), 16)
	u := s.srv.URL + "/attachments/" + at.channel + "/" + at.id + "/" + at.name + "?ex=" + ex + "&is=" + is + "&hm=" + sign(at.id, ex, is) + "&"
	return map[string]any{"id": at.id, "filename": at.name, "content_type": at.mime, "size": at.size, "url": u, "proxy_url": u}
}

func sign(id, ex, is string) string {
	h := sha256.Sum256([]byte("fake-cdn\x00" + id + "\x00" + ex + "\x00" + is))
	return hex.EncodeToString(h[:])
}

// CDNRequests lists the requests that reached the CDN.
func (s *Server) CDNRequests() []CDNRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CDNRequest(nil), s.cdnLog...)
}

func (s *Server) handleCDN(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), r.URL.Query()
	s.mu.Lock()
	at := s.cdn[id]
	exp, err := strconv.ParseInt(q.Get("ex"), 16, 64)
	ok := at != nil && err == nil && q.Get("hm") == sign(id, q.Get("ex"), q.Get("is")) && s.Now().Unix() < exp && at.name == r.PathValue("name")
	status := http.StatusOK
	if !ok {
		status = http.StatusNotFound
	}
	s.cdnLog = append(s.cdnLog, CDNRequest{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Status: status})
	s.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("This content is no longer available."))
		return
	}
	w.Header().Set("Content-Type", at.mime)
	w.Header().Set("Content-Length", strconv.FormatInt(at.size, 10))
	if at.data != nil {
		_, _ = w.Write(at.data)
		return
	}
	chunk := make([]byte, 64<<10)
	for left := at.size; left > 0; {
		n := min(left, int64(len(chunk)))
		if _, err := w.Write(chunk[:n]); err != nil {
			return
		}
		left -= n
	}
}

// rememberLocked keeps a dispatched person's message; s.mu must be held.
func (s *Server) rememberLocked(id string, m Msg, author map[string]any) {
	if s.said == nil {
		s.said = map[string]*said{}
	}
	s.said[id] = &said{id: id, channel: m.ChannelID, guild: m.GuildID, author: author, content: m.Content,
		reference: m.ReplyTo, mentionsBot: m.MentionBot, attachments: m.Attachments, at: s.Now(),
		webhook: m.WebhookID, invoker: m.InteractionUser}
}

// withheldLocked reports whether this session may not read d's content (no
// MESSAGE_CONTENT intent, a guild message that does not mention the bot);
// s.mu must be held.
func (s *Server) withheldLocked(d *said) bool {
	if len(s.identifies) == 0 || d.guild == "" || d.mentionsBot {
		return false
	}
	return s.identifies[len(s.identifies)-1]&int(discordgo.IntentsMessageContent) == 0
}

// saidJSONLocked renders a person's message as the API returns it; s.mu held.
func (s *Server) saidJSONLocked(d *said, withRef bool) map[string]any {
	body := map[string]any{"id": d.id, "channel_id": d.channel, "content": d.content, "type": 0, "author": d.author,
		"timestamp": d.at.UTC().Format(time.RFC3339), "mentions": []any{}, "attachments": []any{}}
	if len(d.attachments) > 0 {
		body["attachments"] = d.attachments
	}
	if d.webhook != "" {
		body["webhook_id"] = d.webhook
	}
	if d.invoker != "" {
		body["interaction_metadata"] = map[string]any{"id": "I" + d.id, "type": 2,
			"user": map[string]any{"id": d.invoker, "username": "user-" + d.invoker}}
	}
	if s.withheldLocked(d) {
		body["content"], body["attachments"] = "", []any{}
	}
	if d.reference != "" {
		body["type"] = 19
		body["message_reference"] = map[string]any{"message_id": d.reference, "channel_id": d.channel, "type": 0}
		if withRef {
			if ref := s.messageJSONLocked(d.reference, false); ref != nil {
				body["referenced_message"] = ref
			}
		}
	}
	return body
}

// messageJSONLocked renders any message the fake knows by id (a person's or
// the bot's); nil when unknown or deleted. s.mu must be held.
func (s *Server) messageJSONLocked(id string, withRef bool) map[string]any {
	if d, ok := s.said[id]; ok {
		return s.saidJSONLocked(d, withRef)
	}
	if i, ok := s.byID[id]; ok && !s.messages[i].Deleted && s.messages[i].ChannelID != "" {
		return s.messageJSON(s.messages[i])
	}
	return nil
}

// channelMessagesLocked lists channel's messages, oldest first; s.mu held.
func (s *Server) channelMessagesLocked(channel string) []map[string]any {
	type item struct {
		n   int64
		msg map[string]any
	}
	var items []item
	for id, d := range s.said {
		if d.channel == channel {
			n, _ := strconv.ParseInt(id, 10, 64)
			items = append(items, item{n, s.saidJSONLocked(d, true)})
		}
	}
	for _, m := range s.messages {
		if m.ChannelID == channel && !m.Deleted && !m.Ephemeral {
			n, _ := strconv.ParseInt(m.ID, 10, 64)
			items = append(items, item{n, s.messageJSON(m)})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].n < items[j].n })
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = it.msg
	}
	return out
}

func (s *Server) handleGetMessages(w http.ResponseWriter, r *http.Request) {
	ch, q := r.PathValue("id"), r.URL.Query()
	limit := 50
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			discordError(w, http.StatusBadRequest, 50035, "Invalid Form Body: limit: int value should be less than or equal to 100.")
			return
		}
		limit = n
	}
	anchors := 0
	for _, k := range []string{"before", "after", "around"} {
		if q.Get(k) != "" {
			anchors++
		}
	}
	if anchors > 1 {
		discordError(w, http.StatusBadRequest, 50035, "Invalid Form Body: only one of before, after and around may be given")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.NoHistory[ch] {
		discordError(w, http.StatusForbidden, 50001, "Missing Access")
		return
	}
	all := s.channelMessagesLocked(ch)
	num := func(m map[string]any) int64 { n, _ := strconv.ParseInt(m["id"].(string), 10, 64); return n }
	var picked []map[string]any
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	for i := len(all) - 1; i >= 0 && len(picked) < limit; i-- { // newest first
		n := num(all[i])
		if (before > 0 && n >= before) || (after > 0 && n <= after) {
			continue
		}
		picked = append(picked, all[i])
	}
	if picked == nil {
		picked = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, picked)
}

func (s *Server) handleGetMessage(w http.ResponseWriter, r *http.Request) {
	ch, id := r.PathValue("id"), r.PathValue("mid")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.NoHistory[ch] {
		discordError(w, http.StatusForbidden, 50001, "Missing Access")
		return
	}
	m := s.messageJSONLocked(id, true)
	if m == nil || m["channel_id"] != ch {
		discordError(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// MessagesRead counts the GET requests for messages (both routes).
func (s *Server) MessagesRead() int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == http.MethodGet && strings.Contains(r.Path, "/messages") {
			n++
		}
	}
	return n
}
