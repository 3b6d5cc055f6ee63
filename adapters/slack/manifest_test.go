package slack

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/detourbot/detour/commands"
)

// manifest is the part of a Slack app manifest the checks read.
type manifest struct {
	Features struct {
		AppHome struct {
			HomeTab bool `yaml:"home_tab_enabled"`
		} `yaml:"app_home"`
		AssistantView *struct {
			Description string `yaml:"assistant_description"`
		} `yaml:"assistant_view"`
		SlashCommands []struct {
			Command     string `yaml:"command"`
			Description string `yaml:"description"`
			UsageHint   string `yaml:"usage_hint"`
		} `yaml:"slash_commands"`
	} `yaml:"features"`
	OAuth struct {
		Scopes struct {
			Bot []string `yaml:"bot"`
		} `yaml:"scopes"`
	} `yaml:"oauth_config"`
	Settings struct {
		Events struct {
			Bot []string `yaml:"bot_events"`
		} `yaml:"event_subscriptions"`
		SocketMode    bool `yaml:"socket_mode_enabled"`
		Interactivity struct {
			Enabled bool `yaml:"is_enabled"`
		} `yaml:"interactivity"`
	} `yaml:"settings"`
}

func readManifest(t *testing.T, name string) manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// builtinCommands reads Slack's reserved command names from testdata.
func builtinCommands(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "slack-builtin-commands.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out[strings.Fields(line)[0]] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !out["/status"] || !out["/remind"] || !out["/topic"] || len(out) < 20 {
		t.Fatalf("the reserved list looks wrong: %d names", len(out))
	}
	return out
}

// Slack's rules for a command name: a slash, then lowercase letters, digits,
// "-" or "_", 32 characters at most.
var reCommand = regexp.MustCompile(`^/[a-z0-9_-]{1,31}$`)

// Both manifests pass Slack's checks on slash commands: no built-in name, valid
// names, no duplicates, at most 50, sizes within Slack's limits; every command
// reaches a detour command; Socket Mode is on.
func TestManifest_NoReservedCommandNames(t *testing.T) {
	reserved := builtinCommands(t)
	for _, file := range []string{"slack-manifest.yaml", "slack-manifest-mentions.yaml"} {
		t.Run(file, func(t *testing.T) {
			m := readManifest(t, file)
			cmds := m.Features.SlashCommands
			if len(cmds) == 0 || len(cmds) > 50 {
				t.Fatalf("%d slash commands", len(cmds))
			}
			seen := map[string]bool{}
			reached := map[commands.Name]bool{}
			for _, c := range cmds {
				switch {
				case reserved[c.Command]:
					t.Errorf("%s is a Slack built-in: Slack refuses the manifest", c.Command)
				case !reCommand.MatchString(c.Command):
					t.Errorf("%q is not a valid Slack command name", c.Command)
				case seen[c.Command]:
					t.Errorf("%s registered twice", c.Command)
				case c.Description == "" || len(c.Description) > 2000 || len(c.UsageHint) > 1000:
					t.Errorf("%s: description or usage hint missing or too long", c.Command)
				}
				seen[c.Command] = true
				text := slashText(c.Command, "")
				cmd, ok := commands.Parse(text)
				if !ok || cmd.Name == "" {
					t.Errorf("%s reaches no detour command (%q)", c.Command, text)
				}
				reached[cmd.Name] = true
			}
			if !seen["/detour"] {
				t.Error("the /detour umbrella is missing")
			}
			for _, n := range []commands.Name{commands.CmdModel, commands.CmdNew, commands.CmdReset, commands.CmdStatus, commands.CmdRecover, commands.CmdHelp} {
				if !reached[n] {
					t.Errorf("no slash command reaches /%s", n)
				}
			}
			if !m.Settings.SocketMode {
				t.Error("socket_mode_enabled must be true")
			}
		})
	}
}

// The mention-only manifest subscribes to mentions and DMs only: the channel
// message events that count against Slack's 30,000 events per hour are gone;
// the full manifest keeps them for thread follow-ups. Both keep the scopes that
// read threads and files (H1, I3).
func TestManifest_MentionsVariantDropsChannelMessageEvents(t *testing.T) {
	full := readManifest(t, "slack-manifest.yaml")
	lean := readManifest(t, "slack-manifest-mentions.yaml")
	busy := []string{"message.channels", "message.groups", "message.mpim"}
	for _, e := range busy {
		if !slices.Contains(full.Settings.Events.Bot, e) {
			t.Errorf("slack-manifest.yaml lacks %s", e)
		}
		if slices.Contains(lean.Settings.Events.Bot, e) {
			t.Errorf("slack-manifest-mentions.yaml still subscribes to %s", e)
		}
	}
	for _, e := range []string{"app_mention", "message.im"} {
		if !slices.Contains(lean.Settings.Events.Bot, e) {
			t.Errorf("slack-manifest-mentions.yaml lacks %s", e)
		}
	}
	// H1: reading a thread's earlier messages (conversations.replies) needs
	// the history scopes whatever events arrive, and files need files:read
	// (I3): both manifests ask for them. A scope costs no events.
	for _, m := range []struct {
		name string
		m    manifest
	}{{"slack-manifest.yaml", full}, {"slack-manifest-mentions.yaml", lean}} {
		for _, s := range []string{"channels:history", "groups:history", "im:history", "mpim:history", "files:read"} {
			if !slices.Contains(m.m.OAuth.Scopes.Bot, s) {
				t.Errorf("%s lacks %s", m.name, s)
			}
		}
	}
	if !slices.Equal(slashNames(full), slashNames(lean)) {
		t.Errorf("the manifests register different commands: %v / %v", slashNames(full), slashNames(lean))
	}
}

func slashNames(m manifest) []string {
	var out []string
	for _, c := range m.Features.SlashCommands {
		out = append(out, c.Command)
	}
	return out
}

// Both manifests enable what live replies need: the AI app container
// (assistant_view, with its description, the assistant_thread_started event and
// the assistant:write scope setSuggestedPrompts and setTitle need), chat:write
// (messages, streaming and the thread status), and interactivity (the model
// picker's block_actions over Socket Mode). covers L1, L2, L4
func TestManifest_L1_L2_L4_LiveRepliesAndAIApp(t *testing.T) {
	for _, file := range []string{"slack-manifest.yaml", "slack-manifest-mentions.yaml"} {
		t.Run(file, func(t *testing.T) {
			m := readManifest(t, file)
			if v := m.Features.AssistantView; v == nil || strings.TrimSpace(v.Description) == "" || len(v.Description) > 1000 {
				t.Error("features.assistant_view with an assistant_description is missing")
			}
			if !slices.Contains(m.Settings.Events.Bot, "assistant_thread_started") {
				t.Error("the assistant_thread_started event is missing")
			}
			for _, scope := range []string{"assistant:write", "chat:write", "im:history"} {
				if !slices.Contains(m.OAuth.Scopes.Bot, scope) {
					t.Errorf("scope %s is missing", scope)
				}
			}
			if !m.Settings.Interactivity.Enabled {
				t.Error("interactivity must be on for the model picker")
			}
		})
	}
}

// Both manifests enable the Home tab and its app_home_opened event, so the
// health board can be published there (views.publish answers not_enabled
// otherwise, https://docs.slack.dev/reference/methods/views.publish), and the
// fake Slack, installed from each, accepts the publish. covers issue 38
func TestManifest_Issue38_HomeTab(t *testing.T) {
	for _, file := range []string{"slack-manifest.yaml", "slack-manifest-mentions.yaml"} {
		t.Run(file, func(t *testing.T) {
			m := readManifest(t, file)
			if !m.Features.AppHome.HomeTab {
				t.Error("features.app_home.home_tab_enabled must be true")
			}
			if !slices.Contains(m.Settings.Events.Bot, "app_home_opened") {
				t.Error("the app_home_opened event is missing")
			}
		})
	}
}
