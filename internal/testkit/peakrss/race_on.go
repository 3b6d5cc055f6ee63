//go:build race

package peakrss

const raceEnabled = true
