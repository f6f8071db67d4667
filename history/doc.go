// Package history is the model of a checked history and its checkers.
//
// A history is what clients recorded while a workload ran under faults:
// for every operation an invocation, then its completion — ok (it
// happened, with the values read), fail (it certainly did not happen) or
// info (unknown: a lost reply, a killed client). Times are readings of
// one clock every process of the machine shares (CLOCK_MONOTONIC), so
// real-time order is comparable across client processes.
//
// # Using a checker
//
//  1. Merge the clients' events with Sort (or read them with ReadAll: a
//     torn last line is dropped, ErrTorn says so).
//  2. Call the checker of the workload: CheckListAppend, CheckRegister,
//     CheckSet, CheckBank, CheckLongFork, CheckMonotonic, CheckLock,
//     CheckQueue, CheckGraph or CheckObserver. Each pairs
//     invocations with completions (Pairs); an invocation without a
//     completion counts as info. A malformed history (a completion
//     without invocation, two outstanding invocations of one process) is
//     reported as one forbidden "malformed" anomaly.
//  3. Result.Valid is false when a forbidden anomaly was found;
//     Result.Counts counts every kind, allowed ones (G2) included;
//     Result.Anomalies holds at most MaxExamples examples per kind, each
//     naming its operations T<index> by the index of their completion.
//     Result marshals as snake_case JSON; Summary is one line.
//
// # What each checker finds
//
// Every kind below is forbidden under strong snapshot isolation except
// G2.
//
//   - list-append (CheckListAppend; Elle, Kingsbury and Alvaro): F "txn"
//     of [append k v] and [r k list]. Each key's version order is its
//     longest read. Found directly: "incompatible-order" (a read not a
//     prefix of the longest), "duplicate-elements", "unexpected" (a value
//     nobody appended), G1a (a value of a failed transaction), G1b (a read
//     ending in a value its writer appended to again), "internal" (a read
//     contradicting its own transaction's earlier reads and appends),
//     "lost-update" (ok transactions that read the same version of a key
//     and all appended to it). Then ww, wr and rw edges between the
//     committed transactions (ok ones, and info ones whose appends were
//     read), plus real-time edges with RealTime, and one cycle per
//     strongly connected component, the most severe found: G0 (ww), G1c
//     (ww and wr), G-single (one rw), G-nonadjacent (rw edges never
//     adjacent), each with "-realtime" when it needs a real-time edge;
//     G2 (adjacent rw edges: write skew) is allowed and counted.
//   - register (CheckRegister; porcupine, per key): F "read", "write",
//     "cas". "not-linearizable" (with the key, and Result.HTML its
//     visualization), "unknown-linearizability" when the search timed
//     out: an unfinished search is never a pass.
//   - set (CheckSet): F "add" and "read". "unexpected" (an element no add
//     added, or only failed ones), "stale" (an ok add missing from a read
//     invoked after it completed, read again later), "lost" (missing and
//     never read again).
//   - bank (CheckBank): F "transfer" and "read". "incomplete-read",
//     "wrong-total", "lost-transfer" (a final balance no subset of the
//     info transfers explains); "unchecked-accounts" counts accounts with
//     too many info transfers to try every subset (not an anomaly).
//   - long-fork (CheckLongFork; Jepsen's): "long-fork" (two reads each
//     seeing a write the other does not), G1a, "unexpected".
//   - monotonic (CheckMonotonic): counters. "lost-update" (a value
//     written twice), "nonmonotonic" (a process reads a key below what it
//     saw before), "nonmonotonic-realtime" (below what a transaction that
//     completed before its invocation saw).
//   - observer (CheckObserver): F "append" and a final read of each key's
//     list and of what the observer's runs processed. "lost",
//     "unexpected", "duplicate-elements" of the lists; "unexpected-run"
//     (a run saw a change never committed), "duplicate-run" (two runs
//     committed for one change), "out-of-order-run", "unprocessed" (a
//     committed change no run followed); "changes" and "runs" count
//     notifications collapsing.
//
// # Invariants the checkers rely on
//
//  1. An info operation may have happened, at any time after its
//     invocation: checkers count its effects as possible, never as
//     certain, and give it an infinite completion time.
//  2. A fail operation did not happen: seeing its effect is an anomaly
//     (G1a, or "unexpected" for sets).
//  3. list-append's appended values are unique per key; long-fork's keys
//     are written once; monotonic's increments write read+1.
//
// # Design notes
//
// Real-time edges go only to each transaction's frontier (the
// transactions invoked after it completed with none wholly in between):
// every other real-time order follows by transitivity, and the O(n²)
// edges would dominate the check of a long history.
//
// The cycle search inside a component goes from the most severe class
// down: a strongly connected component of the subgraph of ww edges (G0),
// then ww and wr (G1c); a breadth-first search closing each rw edge with
// ww and wr edges (G-single), bounded by a budget of edge visits; a
// cycle of a graph of states (node, whether the edge entering it was rw)
// in which rw may only leave a state entered by another edge
// (G-nonadjacent: a closed walk, which snapshot isolation forbids as
// surely as a simple cycle, since start timestamps rise along it); then
// the same with real-time edges; then any cycle. Each found cycle is
// classified by its own edges, so a search cut short by the budget can
// only make a cycle reported under a later search, with its true kind.
//
// The package imports nothing of the module: histories are plain data.
package history
