package statuspage

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// chart is one small chart of the page: a series over the window.
type chart struct {
	ID, Title string
	Unit      string // "", "s", "/s" or "B"
	Unknown   string // why the process has no such figures; "" if it has
	at        []time.Time
	v         []float64 // NaN where unknown
}

// Last is the newest known value, formatted; "-" when none.
func (c chart) Last() string {
	for i := len(c.v) - 1; i >= 0; i-- {
		if !math.IsNaN(c.v[i]) {
			return format(c.v[i], c.Unit)
		}
	}
	return "-"
}

// Max is the largest value in the window, formatted.
func (c chart) Max() string { return format(c.top(), c.Unit) }

func (c chart) top() float64 {
	top := 0.0
	for _, v := range c.v {
		if !math.IsNaN(v) {
			top = max(top, v)
		}
	}
	return top
}

const chartW, chartH = 300.0, 60.0

// SVG draws the series as polylines over [end-window, end], broken where
// a value is unknown.
func (c chart) SVG(end time.Time, window time.Duration) template.HTML {
	top := c.top()
	if top == 0 {
		top = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="chart-%s" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`,
		c.ID, chartW, chartH, chartW, chartH, template.HTMLEscapeString(c.Title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%g" height="%g" class="frame"/>`, chartW, chartH)
	var pts []string
	last := ""
	flush := func() {
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline points="%s"/>`, strings.Join(pts, " "))
			pts = pts[:0]
		}
	}
	for i, v := range c.v {
		if math.IsNaN(v) {
			flush()
			continue
		}
		x := chartW * (1 - end.Sub(c.at[i]).Seconds()/window.Seconds())
		y := chartH - 2 - (chartH-4)*v/top
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", max(x, 0), y))
		last = fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="2"/>`, max(x, 0), y)
	}
	flush()
	b.WriteString(last) // a lone sample draws no line
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers and an escaped title only
}

// durText is a duration as the page prints it: 1h, not 1h0m0s.
func durText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// format prints v in unit: bytes in binary multiples, seconds as a
// duration, rates with two decimals.
func format(v float64, unit string) string {
	switch unit {
	case "B":
		return bytesText(int64(v))
	case "s":
		return time.Duration(v * float64(time.Second)).Round(100 * time.Millisecond).String()
	case "/s":
		return fmt.Sprintf("%.2f/s", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// series is one figure of every point.
func series(pts []point, f func(point) float64) ([]time.Time, []float64) {
	at, v := make([]time.Time, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		at[i], v[i] = p.at, f(p)
	}
	return at, v
}

// rates turns a cumulative counter into a per-second rate between
// consecutive samples; NaN where either is unknown or the counter went
// back (a restart).
func rates(at []time.Time, v []float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		out[i] = math.NaN()
		if i == 0 {
			continue
		}
		dt := at[i].Sub(at[i-1]).Seconds()
		if d := v[i] - v[i-1]; dt > 0 && d >= 0 {
			out[i] = d / dt
		}
	}
	return out
}

// charts are the page's charts, from the samples oldest first.
func charts(pts []point, snap Snapshot) []chart {
	obsUnknown := unknownObservers(snap)
	mk := func(id, title, unit, unknown string, f func(point) float64, rate bool) chart {
		at, v := series(pts, f)
		if rate {
			v = rates(at, v)
		}
		return chart{ID: id, Title: title, Unit: unit, Unknown: unknown, at: at, v: v}
	}
	serverUnknown, storeUnknown := "", ""
	if snap.Server == nil {
		serverUnknown = "not known to this process: the server's page shows it"
	}
	if snap.Store == nil {
		storeUnknown = "not known to this process: the store is not on its disk"
	}
	return []chart{
		mk("backlog", "Pending notifications", "", obsUnknown, func(p point) float64 { return p.backlog }, false),
		mk("lag", "Notification lag (oldest pending)", "s", obsUnknown, func(p point) float64 { return p.lag }, false),
		mk("runs", "Observer runs", "/s", obsUnknown, func(p point) float64 { return p.runs }, true),
		mk("failures", "Observer failures", "/s", obsUnknown, func(p point) float64 { return p.failures }, true),
		mk("sessions", "Sessions", "", serverUnknown, func(p point) float64 { return p.sessions }, false),
		mk("rpcs", "RPCs served", "/s", serverUnknown, func(p point) float64 { return p.reqs }, true),
		mk("store", "Store size", "B", storeUnknown, func(p point) float64 { return p.storeBytes }, false),
	}
}

// unknownObservers says why the observers' figures are missing; "" when
// the snapshot has them.
func unknownObservers(s Snapshot) string {
	switch {
	case s.Observers != nil:
		return ""
	case s.ObserversErr != nil:
		return "could not read them: " + s.ObserversErr.Error()
	}
	return "not known to this process"
}
