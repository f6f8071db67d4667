//go:build race

package main

// raceEnabled: this test binary runs with the race detector, so a binary
// the tests build is built with it too: its packages are then the ones
// the test binary's build compiled (a cold build cache compiles every
// dependency once, not twice), and its children are checked for races as
// the test binary's own children are.
const raceEnabled = true
