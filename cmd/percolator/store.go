package main

import "fmt"

// holder describes the process that holds dir's store, from what it
// publishes.
func holder(dir string) string {
	p, err := readPublished(dir)
	if err != nil || p.Finished || !processAlive(p.PID) {
		return "the process holding it publishes no status (not a running 'percolator index' or 'bank')"
	}
	return fmt.Sprintf("it is held by pid %d: %s", p.PID, p.Command)
}
