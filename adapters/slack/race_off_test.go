//go:build !race

package slack

const raceEnabled = false
