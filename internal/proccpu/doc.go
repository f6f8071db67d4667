// Package proccpu reads the CPU time the process has used, for the
// figures and benchmarks that report CPU per operation.
//
// Invariant: Used never decreases within a process, and is 0 on every
// call where the platform's CPU time is not read (callers print such a
// figure as not measured).
package proccpu
