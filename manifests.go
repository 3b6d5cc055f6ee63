// Package detour holds the repository's files that the binary ships: the Slack
// app manifests `bot init` writes beside a new configuration (docs/slack.md).
package detour

import _ "embed"

// SlackManifest is slack-manifest.yaml: the app with every event (channels.slack.events: all).
//
//go:embed slack-manifest.yaml
var SlackManifest []byte

// SlackManifestMentions is slack-manifest-mentions.yaml: the app for mention-only mode.
//
//go:embed slack-manifest-mentions.yaml
var SlackManifestMentions []byte
