// Package history is the model of a checked history and its checkers.
//
// A history is what clients recorded while a workload ran under faults:
// for every operation an invocation, then its completion — ok (it
// happened, with the values read), fail (it certainly did not happen) or
// info (unknown: a lost reply, a killed client). Times are readings of
// one clock every process of the machine shares (CLOCK_MONOTONIC), so
// real-time order is comparable across client processes.
//
// The checkers search a history for what the system forbids:
//
//   - list-append (Elle's): the version order of each key is inferred from
//     reads of appended lists; dependency edges (ww, wr, rw) and, for
//     strong snapshot isolation, real-time edges build a graph whose
//     cycles are classified G0, G1c, G-single, G-nonadjacent and G2
//     (write skew, allowed under snapshot isolation, counted). G1a
//     (aborted read), G1b (intermediate read), internal inconsistency,
//     incompatible orders, duplicates and lost updates are found directly.
//   - register: single-key read/write/compare-and-set operations are
//     linearizable per key (github.com/anishathalye/porcupine).
//   - set: every acknowledged add is read by the final read; no element
//     that was never added is read.
//   - bank: every read snapshot sums to the total.
//   - long-fork and monotonic: Jepsen's.
//
// An info operation may have happened: checkers count its effects as
// possible, never as certain. A fail operation did not happen: seeing its
// effect is an anomaly (G1a).
//
// The package imports nothing of the module: histories are plain data.
package history
