// Package statuspage is the operator's status page of a long-running
// percolator process (serve, worker, oracle): an HTML page at / showing
// what the process knows, with charts of the last hour drawn from
// samples it keeps in memory.
//
// The caller's contract:
//
//  1. Give New a Read function returning what the process knows now, a
//     Snapshot. A section the process cannot fill stays nil (or carries
//     the error that kept it from reading), and the page says so: it never
//     shows a zero it does not know.
//  2. Run the Page's Run in a goroutine of its own: it samples an
//     Options.Interval after the last sample ended (or at once on Wake),
//     until its context ends, keeping Options.Window of samples in a ring
//     buffer. Reads never overlap, and a slow one (a large backlog's scan)
//     spaces the samples out rather than keep the process busy; each gets
//     a context bounded by 30s, so a store that does not answer shows as
//     an error.
//  3. Serve the Page (an http.Handler) at /, beside the process's
//     /metrics; wrap both in Protect when the listener may be reached from
//     other machines.
//
// The page is server-rendered HTML with inline SVG charts and refreshes
// itself with a meta refresh: no script, nothing fetched from elsewhere,
// so it works offline.
//
// Invariant: the ring holds at most Window/Interval+1 samples, oldest
// first from ring.start; the charts and rates are drawn from it alone.
package statuspage
