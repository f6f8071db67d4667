package view

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/seed-992972ee/percolator"
)

// Locks prints the locks in the store (db.Locks) as a table, or JSON.
func Locks(w io.Writer, locks []percolator.LockInfo, jsonOut bool) error {
	type entry struct {
		Row     string `json:"row"`
		Column  string `json:"column"`
		StartTS uint64 `json:"start_ts"`
		Op      string `json:"op"`
		Primary string `json:"primary"`
		Owner   string `json:"owner"`
		Expires string `json:"expires"`
	}
	list := []entry{}
	for _, l := range locks {
		list = append(list, entry{Path(string(l.Row)), Text(l.Column), l.StartTS, l.Lock.Op.String(),
			Path(string(l.Lock.PrimaryRow)) + "/" + Text(l.Lock.PrimaryCol), l.Lock.Owner, l.Expires.Format("15:04:05.000")})
	}
	if jsonOut {
		return JSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tSTART_TS\tOP\tPRIMARY\tOWNER\tEXPIRES")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.Row, e.Column, e.StartTS, e.Op, e.Primary, e.Owner, e.Expires)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d locks\n", len(list))
	return nil
}

// Quarantined prints the quarantined notifications (db.Quarantine) as a
// table, or JSON.
func Quarantined(w io.Writer, qs []percolator.Quarantined, jsonOut bool) error {
	type entry struct {
		Row      string `json:"row"`
		Column   string `json:"column"`
		Observer string `json:"observer"`
		Failures int    `json:"failures"`
		Error    string `json:"error"`
	}
	list := []entry{}
	for _, q := range qs {
		list = append(list, entry{Path(q.Row), q.Column, q.Observer, q.Failures, q.Error})
	}
	if jsonOut {
		return JSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tOBSERVER\tFAILURES\tERROR")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", e.Row, e.Column, e.Observer, e.Failures, FirstLine(e.Error))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d quarantined\n", len(list))
	return nil
}

// Pending prints the pending notifications (db.PendingNotifications,
// listed up to limit, 0 for all) as a table, or JSON.
func Pending(w io.Writer, ps []percolator.PendingNotification, limit int, jsonOut bool) error {
	type entry struct {
		Row      string        `json:"row"`
		Column   string        `json:"column"`
		Versions int           `json:"changes"`
		Age      time.Duration `json:"age_ns"`
	}
	list := []entry{}
	for _, p := range ps {
		list = append(list, entry{Path(p.Row), p.Column, p.Versions, p.Age})
	}
	if jsonOut {
		return JSON(w, list)
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
