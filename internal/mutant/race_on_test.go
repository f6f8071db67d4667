//go:build race

package mutant

// raceEnabled: this test binary runs with the race detector, so the
// tagged vet builds with it too: the dependencies' export data it needs
// are then the ones the test binary's build compiled (a cold build cache
// compiles every dependency once, not twice).
const raceEnabled = true
