package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/docindex"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// statusReport is what `status` prints, as text or JSON.
type statusReport struct {
	Dir    string `json:"dir,omitempty"`
	Server string `json:"server,omitempty"`
	// Source is "store" (read from the store) or "published" (the store
	// is held by a running command; this is what it published).
	Source    string                     `json:"source"`
	Observers *percolator.ObserverStatus `json:"observers,omitempty"`
	Index     *docindex.Counts           `json:"index,omitempty"`
	// Run is the status published by the command running now, or by the
	// last one.
	Run *published `json:"run,omitempty"`
	// Age is how old Run is.
	Age time.Duration `json:"age_ns,omitempty"`
}

// percolator status: the notification backlog and the observers'
// counters; while a command holds the store, what it publishes.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	var tg target
	tg.register(fs, "database directory")
	jsonOut := fs.Bool("json", false, "print the status as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := tg.validate(); err != nil {
		return err
	}
	rep, err := readStatus(ctx, &tg)
	if err != nil {
		return err
	}
	if *jsonOut {
		return writeJSON(stdout, rep)
	}
	printStatus(stdout, rep)
	return nil
}

// readStatus reads the store's status or, if a running command holds it,
// what that command publishes.
func readStatus(ctx context.Context, tg *target) (statusReport, error) {
	if tg.server != "" || tg.bigtable != "" {
		rep := statusReport{Server: tg.server, Source: "server"}
		if tg.bigtable != "" {
			rep.Server, rep.Source = tg.String(), "bigtable"
		}
		err := withDB(ctx, tg, func(db *percolator.DB) error { return rep.fromStore(ctx, db) })
		return rep, err
	}
	dir := tg.dir
	rep := statusReport{Dir: dir, Source: "store"}
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir, MustExist: true})
	if errors.Is(err, pebble.ErrLocked) {
		return publishedStatus(dir, err)
	}
	if err != nil {
		return rep, err
	}
	err = errors.Join(rep.fromStore(ctx, db), db.Close())
	if p, perr := readPublished(dir); perr == nil {
		rep.Run, rep.Age = &p, time.Since(p.Updated)
	}
	return rep, err
}

func (rep *statusReport) fromStore(ctx context.Context, db *percolator.DB) error {
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	rep.Observers = &st
	has, err := docindex.HasIndex(ctx, db)
	if err != nil || !has {
		return err
	}
	c, err := docindex.StoredCounts(ctx, db)
	rep.Index = &c
	return err
}

// publishedStatus is the status of a store another process holds: what
// that process published, if it is alive and publishes.
func publishedStatus(dir string, locked error) (statusReport, error) {
	rep := statusReport{Dir: dir, Source: "published"}
	p, err := readPublished(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return rep, fmt.Errorf("%w\nthe process holding it publishes no status (it is not a running 'percolator index' or 'bank')", locked)
	case err != nil:
		return rep, fmt.Errorf("%w\nreading the status it publishes: %v", locked, err)
	case p.Finished || !processAlive(p.PID):
		return rep, fmt.Errorf("%w\nthe last status published there is from pid %d, which has exited (%s ago); the process holding the store now publishes none",
			locked, p.PID, time.Since(p.Updated).Round(time.Second))
	}
	rep.Run, rep.Age, rep.Observers = &p, time.Since(p.Updated), p.Observers
	return rep, nil
}

func printStatus(w io.Writer, rep statusReport) {
	if rep.Source == "published" {
		fmt.Fprintf(w, "the store at %s is in use by pid %d (%s);\nits status as it published it %s ago:\n\n",
			rep.Dir, rep.Run.PID, rep.Run.Command, rep.Age.Round(100*time.Millisecond))
		fmt.Fprintf(w, "phase: %s", rep.Run.Phase)
		if rep.Run.Progress != "" {
			fmt.Fprintf(w, " (%s)", rep.Run.Progress)
		}
		fmt.Fprintf(w, ", running for %s\n", rep.Run.Updated.Sub(rep.Run.Started).Round(time.Second))
		printLines(w, rep.Run.Summary)
		fmt.Fprintln(w)
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

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
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
		fmt.Fprintf(tw, "%s\t%d\t%s\n", displayText(c.Column), c.Pending, oldest)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBSERVER\tCOLUMN\tRUNS\tCOMMITS\tCONFLICTS\tFAILURES\tQUARANTINED\tSELF-TRIGGERS")
	for _, o := range st.Observers {
		c := o.Counts
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", displayText(o.Name), displayText(o.Column), c["runs"], c["commits"], c["conflicts"], c["failures"], c["quarantined"], c["self_triggers"])
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
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", p.Index, p.Of, displayText(p.Owner), displayText(p.Worker),
			displayBound(p.Start), displayBound(p.End), p.Backlog, p.Version, time.Since(p.Updated).Round(100*time.Millisecond))
	}
	_ = tw.Flush()
	sc := st.Scanners
	fmt.Fprintf(w, "notified rows in no worker's range: %d (found by the passes over the whole keyspace: %d so far, %d over a range)\n",
		st.Unowned, sc["full_passes"], sc["range_passes"])
}

// displayBound is a range bound as printed: "-" for the keyspace's start
// or end (nil), else the row key quoted as a path is.
func displayBound(b []byte) string {
	if b == nil {
		return "-"
	}
	return displayPath(string(b))
}

// printRun prints the last (or running) command's outcome and bad files.
func printRun(w io.Writer, rep statusReport) {
	r := rep.Run
	if rep.Source == "store" {
		outcome := "finished"
		switch {
		case r.Error != "":
			outcome = "failed: " + firstLineOf(r.Error)
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

// percolator notifications: pending (default) or quarantined
// notifications; --retry re-queues the quarantined ones.
func runNotifications(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("notifications", stderr)
	var tg target
	tg.register(fs, "database directory")
	quarantined := fs.Bool("quarantined", false, "list the quarantined notifications")
	retry := fs.Bool("retry", false, "re-queue every quarantined notification")
	limit := fs.Int("limit", 100, "list at most this many pending notifications (0: all)")
	jsonOut := fs.Bool("json", false, "print the list as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must be at least 0")
	}
	if err := tg.validate(); err != nil {
		return err
	}
	return withDB(ctx, &tg, func(db *percolator.DB) error {
		switch {
		case *retry:
			n, err := db.RetryQuarantined(ctx)
			if err == nil {
				fmt.Fprintf(stdout, "re-queued %d notifications\n", n)
			}
			return err
		case *quarantined:
			return printQuarantined(ctx, db, *jsonOut, stdout)
		}
		return printPending(ctx, db, *limit, *jsonOut, stdout)
	})
}

func printQuarantined(ctx context.Context, db *percolator.DB, jsonOut bool, w io.Writer) error {
	qs, err := db.Quarantine(ctx)
	if err != nil {
		return err
	}
	type entry struct {
		Row      string `json:"row"`
		Column   string `json:"column"`
		Observer string `json:"observer"`
		Failures int    `json:"failures"`
		Error    string `json:"error"`
	}
	list := []entry{}
	for _, q := range qs {
		list = append(list, entry{displayPath(q.Row), q.Column, q.Observer, q.Failures, q.Error})
	}
	if jsonOut {
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tOBSERVER\tFAILURES\tERROR")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", e.Row, e.Column, e.Observer, e.Failures, firstLineOf(e.Error))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d quarantined\n", len(list))
	return nil
}

func printPending(ctx context.Context, db *percolator.DB, limit int, jsonOut bool, w io.Writer) error {
	ps, err := db.PendingNotifications(ctx, limit)
	if err != nil {
		return err
	}
	type entry struct {
		Row      string        `json:"row"`
		Column   string        `json:"column"`
		Versions int           `json:"changes"`
		Age      time.Duration `json:"age_ns"`
	}
	list := []entry{}
	for _, p := range ps {
		list = append(list, entry{displayPath(p.Row), p.Column, p.Versions, p.Age})
	}
	if jsonOut {
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tCHANGES\tAGE")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", e.Row, e.Column, e.Versions, e.Age.Round(time.Millisecond))
	}
	_ = tw.Flush()
	shown := "all"
	if limit > 0 {
		shown = fmt.Sprintf("at most %d", limit)
	}
	fmt.Fprintf(w, "%d pending (listing %s)\n", len(list), shown)
	return nil
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// percolator unobserve: unregister an observer (db.Unobserve). Its
// pending notifications are cleared by the next scanners if no other
// observer watches its column; the index job registers its observers
// again on its next run.
func runUnobserve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("unobserve", stderr)
	var tg target
	tg.register(fs, "database directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want the name of one observer (percolator status lists them)")
	}
	name := fs.Arg(0)
	if err := tg.validate(); err != nil {
		return err
	}
	return withDB(ctx, &tg, func(db *percolator.DB) error {
		if err := db.Unobserve(ctx, name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "unregistered observer %s\n", name)
		return nil
	})
}
