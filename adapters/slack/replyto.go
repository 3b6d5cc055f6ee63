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
	p := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(s), "slack:"), "|", 4)
	p = append(p, "", "", "")
	return target{Channel: p[0], ThreadTS: p[1], User: p[2], ResponseURL: p[3]}
}
