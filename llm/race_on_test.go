//go:build race

package llm

// raceEnabled: the race detector's shadow memory inflates RSS several times.
const raceEnabled = true
