//go:build !race

package mutant

// raceEnabled: see race_on_test.go.
const raceEnabled = false
