//go:build race

package slack

const raceEnabled = true
