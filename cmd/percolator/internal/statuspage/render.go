package statuspage

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/seed-992972ee/percolator"
)

// view is what the template shows.
type view struct {
	Process, About   string
	Refresh          int // seconds
	Sampled          bool
	SampledAgo       string
	Interval, Window string

	Observers        *percolator.ObserverStatus
	ObserverRows     []observerRow
	Lag              string
	ObserversUnknown string
	Partitions       []partitionRow

	Server        *Server
	RPCRate       string
	ServerUnknown string

	Oracle        *Oracle
	OracleUnknown string

	Store        *Store
	StoreSize    string
	StoreUnknown string

	Charts []chartView
}

type observerRow struct {
	Name, Column, Pending, Oldest, Runs, Rate, Failures, Quarantined string
}

type partitionRow struct {
	Part, Owner, Worker, Range, Backlog, Age string
}

type chartView struct {
	chart
	SVG template.HTML
}

// minRefresh is the shortest time between the page's refreshes, whatever
// the sample interval: a browser left open should not load the page
// every second.
const minRefresh = 5 * time.Second

// ServeHTTP serves the page at / (any other path is not found).
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p.view()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

func (p *Page) view() view {
	pts, snap, at := p.history()
	prev, prevAt := p.previous()
	now := p.opts.Now()
	v := view{Process: p.opts.Process, About: p.opts.About, Refresh: int(max(minRefresh, p.opts.Interval).Round(time.Second) / time.Second),
		Sampled: !at.IsZero(), SampledAgo: now.Sub(at).Round(time.Second).String(),
		Interval: durText(p.opts.Interval), Window: durText(p.opts.Window)}
	v.observers(snap, prev, at.Sub(prevAt).Seconds(), now)
	v.server(snap, pts)
	v.oracleAndStore(snap)
	for _, c := range charts(pts, snap) {
		v.Charts = append(v.Charts, chartView{chart: c, SVG: c.SVG(now, p.opts.Window)})
	}
	return v
}

func (v *view) observers(snap, prev Snapshot, dt float64, now time.Time) {
	v.ObserversUnknown = unknownObservers(snap)
	o := snap.Observers
	if o == nil {
		return
	}
	v.Observers = o
	pending, oldest := map[string]int{}, map[string]time.Duration{}
	lag := time.Duration(0)
	for _, c := range o.Columns {
		pending[c.Column], oldest[c.Column] = c.Pending, c.Oldest
		lag = max(lag, c.Oldest)
	}
	v.Lag = "none pending"
	if lag > 0 {
		v.Lag = lag.Round(100 * time.Millisecond).String()
	}
	before := map[string]int64{}
	if prev.Observers != nil {
		for _, ob := range prev.Observers.Observers {
			before[ob.Name] = ob.Counts["runs"]
		}
	}
	for _, ob := range o.Observers {
		row := observerRow{Name: text(ob.Name), Column: text(ob.Column), Pending: "0", Oldest: "-",
			Runs: fmt.Sprint(ob.Counts["runs"]), Rate: "-",
			Failures: fmt.Sprint(ob.Counts["failures"]), Quarantined: fmt.Sprint(ob.Counts["quarantined"])}
		if n := pending[ob.Column]; n > 0 {
			row.Pending, row.Oldest = fmt.Sprint(n), oldest[ob.Column].Round(100*time.Millisecond).String()
		}
		if b, ok := before[ob.Name]; ok && dt > 0 && ob.Counts["runs"] >= b {
			row.Rate = format(float64(ob.Counts["runs"]-b)/dt, "/s")
		}
		v.ObserverRows = append(v.ObserverRows, row)
	}
	for _, pt := range o.Partitions {
		v.Partitions = append(v.Partitions, partitionRow{Part: fmt.Sprintf("%d/%d", pt.Index, pt.Of), Owner: text(pt.Owner), Worker: text(pt.Worker),
			Range: bound(pt.Start, "start") + " .. " + bound(pt.End, "end"), Backlog: fmt.Sprint(pt.Backlog),
			Age: now.Sub(pt.Updated).Round(100 * time.Millisecond).String()})
	}
}

func (v *view) server(snap Snapshot, pts []point) {
	v.Server = snap.Server
	if v.Server == nil {
		v.ServerUnknown = "This process is not a server: sessions and RPCs are on the server's page."
		return
	}
	v.RPCRate = "-"
	if n := len(pts); n >= 2 {
		r := rates([]time.Time{pts[n-2].at, pts[n-1].at}, []float64{pts[n-2].reqs, pts[n-1].reqs})
		if !math.IsNaN(r[1]) {
			v.RPCRate = format(r[1], "/s")
		}
	}
}

func (v *view) oracleAndStore(snap Snapshot) {
	if v.Oracle = snap.Oracle; v.Oracle == nil {
		v.OracleUnknown = "Not known to this process: the oracle's own page (or the server's) shows it."
	}
	if v.Store = snap.Store; v.Store == nil {
		v.StoreUnknown = "Not known to this process: the store is not on its disk (the server's page shows it)."
		return
	}
	v.StoreSize = bytesText(v.Store.Bytes)
}

// text is a name as shown: invalid UTF-8 quoted, so no byte is lost.
func text(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return fmt.Sprintf("%q", s)
}

// bound is a range bound as shown: what for the keyspace's end, else
// the key quoted.
func bound(b []byte, what string) string {
	if b == nil {
		return "(" + what + ")"
	}
	return fmt.Sprintf("%q", b)
}
