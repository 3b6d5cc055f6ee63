package fakediscord

// RemoveMessage deletes one of the bot's messages as a moderator would (a
// person with Manage Messages, in Discord's client): later edits and deletes
// of it get 404 code 10008 Unknown Message, as Discord answers for a deleted
// message (https://discord.com/developers/docs/resources/message#edit-message;
// https://discord.com/developers/docs/topics/opcodes-and-status-codes#json),
// and MESSAGE_DELETE is dispatched. It is not one of the bot's Deletes. It
// reports whether the message existed.
func (s *Server) RemoveMessage(id string) bool {
	s.mu.Lock()
	i, mine := s.byID[id]
	if !mine || s.messages[i].Deleted {
		s.mu.Unlock()
		return false
	}
	s.messages[i].Deleted = true
	ch := s.where[id]
	guild := s.channels[ch].guildID
	s.mu.Unlock()
	body := map[string]any{"id": id, "channel_id": ch}
	if guild != "" {
		body["guild_id"] = guild
	}
	s.Dispatch("MESSAGE_DELETE", body)
	return true
}
