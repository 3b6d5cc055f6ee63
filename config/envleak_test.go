package config

import (
	"strings"
	"testing"
)

// A ${VAR} put where it does not belong (a key's variable as a URL, a number,
// a user) is refused with the reference, never with what the environment
// holds: the value may be a key. covers P4
func TestParse_P4_ErrorsQuoteTheReferenceNotTheValue(t *testing.T) {
	const leak = "sk-CANARY-env-leak-0001"
	env := fakeEnv(map[string]string{"LEAK": leak})
	base := "providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents:\n  defaults:\n    model: {primary: o/m}\n"
	for _, tc := range []struct{ src, want string }{
		{"providers:\n  o: {base_url: \"${LEAK}\"}\nagents: {defaults: {model: {primary: o/m}}}\n", `c.yaml:2: providers.o.base_url: bad URL "${LEAK}"`},
		{base + "    timeouts: {idle_seconds: \"${LEAK}\"}\n", `c.yaml:6: agents.defaults.timeouts.idle_seconds: bad number "${LEAK}"`},
		{"providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: \"${LEAK}\"}}}\n", `c.yaml:3: agents.defaults.model.primary: bad model "${LEAK}"`},
		{base + "admin: {users: [\"${LEAK}\"]}\n", `c.yaml:6: admin.users[0]: bad user "${LEAK}"`},
		{base + "notices: {users: \"${LEAK}\"}\n", `c.yaml:6: notices.users: bad value "${LEAK}"`},
		{base + "server: {listen: \"${LEAK}\"}\n", `c.yaml:6: server.listen: bad address "${LEAK}"`},
	} {
		_, err := Parse("c.yaml", []byte(tc.src), env)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "CANARY") {
			t.Errorf("%s\nerror: %v\nwant: %s", tc.src, err, tc.want)
		}
	}
}
