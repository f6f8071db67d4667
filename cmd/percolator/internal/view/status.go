package view

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/docindex"
)

// Status is what `status` prints, as text (PrintStatus) or JSON
// (MarshalJSON).
type Status struct {
	Dir    string
	Server string
	// Source is "store" (read from the store), "server" or "bigtable", or
	// "published" (the store is held by a running command; this is what
	// it published).
	Source string
	// Format is the store's on-disk format version (0 when published).
	Format    uint64
	GC        *GCState
	Observers *percolator.ObserverStatus
	Index     *docindex.Counts
	// Run is the status published by the command running now, or by the
	// last one.
	Run *runstatus.Status
	// Age is how old Run is.
	Age time.Duration
}

// FromStore reads the observers' status and the index's counts from db.
func (s *Status) FromStore(ctx context.Context, db *percolator.DB) error {
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	s.Observers = &st
	s.Format = db.FormatVersion()
	gc, err := db.GCStatus(ctx)
	if err != nil {
		return err
	}
	s.GC = GCStateOf(gc)
	has, err := docindex.HasIndex(ctx, db)
	if err != nil || !has {
		return err
	}
	c, err := docindex.StoredCounts(ctx, db)
	s.Index = &c
	return err
}

// PublishedStatus is the status of a store in dir that another process
// holds (its open failed with locked): what that process published, if
// it is alive and publishes.
func PublishedStatus(dir string, locked error) (Status, error) {
	rep := Status{Dir: dir, Source: "published"}
	p, err := runstatus.Read(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return rep, fmt.Errorf("%w\nthe process holding it publishes no status (it is not a running 'percolator index' or 'bank')", locked)
	case err != nil:
		return rep, fmt.Errorf("%w\nreading the status it publishes: %v", locked, err)
	case p.Finished || !runstatus.Alive(p.PID):
		return rep, fmt.Errorf("%w\nthe last status published there is from pid %d, which has exited (%s ago); the process holding the store now publishes none",
			locked, p.PID, time.Since(p.Updated).Round(time.Second))
	}
	rep.Run, rep.Age, rep.Observers = &p, time.Since(p.Updated), p.Observers
	return rep, nil
}

// PrintStatus prints the status as text: what a running command
// published, the index's counts, the observers' tables and the last
// run.
func PrintStatus(w io.Writer, rep Status) {
	if rep.Source == "published" {
		printPublished(w, rep)
	}
	if rep.Format != 0 {
		fmt.Fprintf(w, "store format: %d\n\n", rep.Format)
	}
	if rep.GC != nil {
		printGC(w, rep.GC)
	}
	if rep.Index != nil {
		fmt.Fprintf(w, "index: %d documents, %d terms, %d duplicate clusters (as last counted)\n\n", rep.Index.Documents, rep.Index.Terms, rep.Index.Clusters)
	}
	if rep.Observers != nil {
		printObservers(w, *rep.Observers)
	}
	if rep.Run != nil {
		printRun(w, rep)
	}
}

func printPublished(w io.Writer, rep Status) {
	fmt.Fprintf(w, "the store at %s is in use by pid %d (%s);\nits status as it published it %s ago:\n\n",
		rep.Dir, rep.Run.PID, rep.Run.Command, rep.Age.Round(100*time.Millisecond))
	fmt.Fprintf(w, "phase: %s", rep.Run.Phase)
	if rep.Run.Progress != "" {
		fmt.Fprintf(w, " (%s)", rep.Run.Progress)
	}
	fmt.Fprintf(w, ", running for %s\n", rep.Run.Updated.Sub(rep.Run.Started).Round(time.Second))
	for _, l := range rep.Run.Summary {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
}

// printObservers prints the backlog and counters as aligned tables.
func printObservers(w io.Writer, st percolator.ObserverStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COLUMN\tPENDING\tOLDEST")
	for _, c := range st.Columns {
		oldest := "-"
		if c.Pending > 0 {
			oldest = c.Oldest.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", Text(c.Column), c.Pending, oldest)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBSERVER\tCOLUMN\tRUNS\tCOMMITS\tCONFLICTS\tFAILURES\tQUARANTINED\tSELF-TRIGGERS")
	for _, o := range st.Observers {
		c := o.Counts
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", Text(o.Name), Text(o.Column), c["runs"], c["commits"], c["conflicts"], c["failures"], c["quarantined"], c["self_triggers"])
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nquarantined notifications: %d\n", st.Quarantined)
	sc := st.Scanners
	fmt.Fprintf(w, "scanners: %d scans found %d notified rows, visiting %d keys in %s; %d jumps, %d compactions of the notify keyspace\n",
		sc["scans"], sc["scan_rows"], sc["scan_keys"], (time.Duration(sc["scan_micros"]) * time.Microsecond).Round(time.Millisecond), sc["scanner_jumps"], sc["compactions"])
	if len(st.Partitions) > 0 {
		printPartitions(w, st)
	}
}

// printPartitions prints the ranges the partitioned workers published:
// who owns which part of the notify keyspace, and its backlog.
func printPartitions(w io.Writer, st percolator.ObserverStatus) {
	fmt.Fprintln(w, "\npartitions of the notify keyspace (workers splitting it):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tOWNER\tWORKER\tSTART\tEND\tBACKLOG\tVERSION\tAGE")
	for _, p := range st.Partitions {
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", p.Index, p.Of, Text(p.Owner), Text(p.Worker),
			bound(p.Start), bound(p.End), p.Backlog, p.Version, time.Since(p.Updated).Round(100*time.Millisecond))
	}
	_ = tw.Flush()
	sc := st.Scanners
	fmt.Fprintf(w, "notified rows in no worker's range: %d (found by the passes over the whole keyspace: %d so far, %d over a range)\n",
		st.Unowned, sc["full_passes"], sc["range_passes"])
}

// bound is a range bound as printed: "-" for the keyspace's start or
// end (nil), else the row key quoted as a path is.
func bound(b []byte) string {
	if b == nil {
		return "-"
	}
	return Path(string(b))
}

// printRun prints the last (or running) command's outcome and bad files.
func printRun(w io.Writer, rep Status) {
	r := rep.Run
	if rep.Source == "store" {
		outcome := "finished"
		switch {
		case r.Error != "":
			outcome = "failed: " + FirstLine(r.Error)
		case !r.Finished:
			outcome = "ended without finishing (killed?)"
		}
		fmt.Fprintf(w, "\nlast run: %s (pid %d), %s %s ago\n", r.Command, r.PID, outcome, rep.Age.Round(time.Second))
	}
	if r.BadTotal == 0 {
		return
	}
	fmt.Fprintf(w, "bad files: %d skipped (path: reason)\n", r.BadTotal)
	for _, b := range r.Bad {
		fmt.Fprintf(w, "  %s: %s\n", b.Path, b.Reason)
	}
	if r.BadTotal > len(r.Bad) {
		fmt.Fprintf(w, "  ... and %d more\n", r.BadTotal-len(r.Bad))
	}
}
