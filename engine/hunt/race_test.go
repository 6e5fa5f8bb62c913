//go:build race

package hunt

const raceEnabled = true
