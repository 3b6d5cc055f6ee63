package fakediscord

import (
	"regexp"
	"slices"
)

// mentionRE finds what Discord parses as a mention in message content.
var mentionRE = regexp.MustCompile(`@everyone|@here|<@!?(\d+)>|<@&(\d+)>`)

// liveMentions lists the mentions in content that would ping, given the request's
// allowed_mentions (nil: Discord parses everything) and whether the message
// replies to one by replied (its author's id).
func liveMentions(content string, am *allowedMentions, reply bool, replied string) []string {
	parses := func(kind string) bool { return am == nil || slices.Contains(am.Parse, kind) }
	var live []string
	for _, m := range mentionRE.FindAllStringSubmatch(content, -1) {
		switch {
		case m[0] == "@everyone" || m[0] == "@here":
			if parses("everyone") {
				live = append(live, m[0])
			}
		case m[1] != "":
			if parses("users") || (am != nil && slices.Contains(am.Users, m[1])) {
				live = append(live, "user:"+m[1])
			}
		case m[2] != "":
			if parses("roles") || (am != nil && slices.Contains(am.Roles, m[2])) {
				live = append(live, "role:"+m[2])
			}
		}
	}
	if reply && replied != "" && (am == nil || am.RepliedUser) {
		live = append(live, "replied:"+replied)
	}
	return live
}
