package view

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/seed-992972ee/percolator"
)

// lockJSON is a lock as `locks --json` prints it.
type lockJSON struct {
	Row        UserBytes `json:"row"`
	Column     UserBytes `json:"column"`
	StartTS    uint64    `json:"start_ts"`
	Op         string    `json:"op"`
	PrimaryRow UserBytes `json:"primary_row"`
	PrimaryCol UserBytes `json:"primary_column"`
	Owner      string    `json:"owner"`
	Expires    string    `json:"expires"`
	Async      bool      `json:"async"`
}

func (l lockJSON) MarshalJSON() ([]byte, error) { return marshalFlat(l) }

// Locks prints the locks in the store (db.Locks) as a table, or JSON.
func Locks(w io.Writer, locks []percolator.LockInfo, jsonOut bool) error {
	if jsonOut {
		list := []lockJSON{}
		for _, l := range locks {
			list = append(list, lockJSON{UserBytes(l.Row), UserBytes(l.Column), l.StartTS, l.Lock.Op.String(),
				UserBytes(l.Lock.PrimaryRow), UserBytes(l.Lock.PrimaryCol), l.Lock.Owner, Time(l.Expires), l.Lock.Async})
		}
		return JSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tSTART_TS\tOP\tPRIMARY\tOWNER\tEXPIRES")
	for _, l := range locks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", Path(string(l.Row)), Text(l.Column), l.StartTS, l.Lock.Op,
			Path(string(l.Lock.PrimaryRow))+"/"+Text(l.Lock.PrimaryCol), l.Lock.Owner, l.Expires.Format("15:04:05.000"))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d locks\n", len(locks))
	return nil
}

// quarantinedJSON is a quarantined notification as `notifications
// --quarantined --json` prints it.
type quarantinedJSON struct {
	Row           UserBytes `json:"row"`
	Column        UserBytes `json:"column"`
	Observer      string    `json:"observer"`
	Failures      int       `json:"failures"`
	Error         string    `json:"error"`
	QuarantinedAt string    `json:"quarantined_at,omitempty"`
}

func (q quarantinedJSON) MarshalJSON() ([]byte, error) { return marshalFlat(q) }

// Quarantined prints the quarantined notifications (db.Quarantine) as a
// table, or JSON.
func Quarantined(w io.Writer, qs []percolator.Quarantined, jsonOut bool) error {
	if jsonOut {
		list := []quarantinedJSON{}
		for _, q := range qs {
			e := quarantinedJSON{Row: UserBytes(q.Row), Column: UserBytes(q.Column), Observer: q.Observer, Failures: q.Failures, Error: q.Error}
			if q.WallMS > 0 {
				e.QuarantinedAt = Time(time.UnixMilli(q.WallMS))
			}
			list = append(list, e)
		}
		return JSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tOBSERVER\tFAILURES\tERROR")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", Path(q.Row), q.Column, q.Observer, q.Failures, FirstLine(q.Error))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d quarantined\n", len(qs))
	return nil
}

// pendingJSON is a pending notification as `notifications --json`
// prints it.
type pendingJSON struct {
	Row     UserBytes `json:"row"`
	Column  UserBytes `json:"column"`
	Changes int       `json:"changes"`
	AgeS    float64   `json:"age_s"`
}

func (p pendingJSON) MarshalJSON() ([]byte, error) { return marshalFlat(p) }

// Pending prints the pending notifications (db.PendingNotifications,
// listed up to limit, 0 for all) as a table, or JSON.
func Pending(w io.Writer, ps []percolator.PendingNotification, limit int, jsonOut bool) error {
	if jsonOut {
		list := []pendingJSON{}
		for _, p := range ps {
			list = append(list, pendingJSON{UserBytes(p.Row), UserBytes(p.Column), p.Versions, Seconds(p.Age)})
		}
		return JSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tCHANGES\tAGE")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", Path(p.Row), p.Column, p.Versions, p.Age.Round(time.Millisecond))
	}
	_ = tw.Flush()
	shown := "all"
	if limit > 0 {
		shown = fmt.Sprintf("at most %d", limit)
	}
	fmt.Fprintf(w, "%d pending (listing %s)\n", len(ps), shown)
	return nil
}

// Requeued prints how many quarantined notifications `notifications
// --retry` re-queued, as text or JSON.
func Requeued(w io.Writer, n int, jsonOut bool) error {
	if jsonOut {
		return JSON(w, struct {
			Requeued int `json:"requeued"`
		}{n})
	}
	_, err := fmt.Fprintf(w, "re-queued %d notifications\n", n)
	return err
}
