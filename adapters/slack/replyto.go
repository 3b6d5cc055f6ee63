package slack

import "strings"

// target is where answers go, carried in Inbound.ReplyTo / Outbound.ReplyTo as
// "<channel>|<thread_ts>|<user>|<response_url>". Trailing empty fields are dropped, so a
// thread reply target looks like "C123|1712.000100" and a bare channel id ("C0123",
// also accepted as "slack:C0123") is a valid target for admin reports. user (and
// response_url) are set only for native slash commands, whose answers are ephemeral.
type target struct {
	Channel     string
	ThreadTS    string
	User        string
	ResponseURL string
}

func (t target) encode() string {
	s := t.Channel + "|" + t.ThreadTS + "|" + t.User + "|" + t.ResponseURL
	return strings.TrimRight(s, "|")
}

// slash reports whether the target is a slash command's (answers are ephemeral).
func (t target) slash() bool { return t.User != "" }

func decodeTarget(s string) target {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "slack:")
	parts := strings.SplitN(s, "|", 4)
	var t target
	t.Channel = parts[0]
	if len(parts) > 1 {
		t.ThreadTS = parts[1]
	}
	if len(parts) > 2 {
		t.User = parts[2]
	}
	if len(parts) > 3 {
		t.ResponseURL = parts[3]
	}
	return t
}
