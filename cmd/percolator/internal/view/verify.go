package view

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/seed-992972ee/percolator/verify"
)

// verifyJSON is what `verify --json` prints: the verdict and the figures
// of its text; the anomalies' examples are in report.json.
type verifyJSON struct {
	Valid     bool           `json:"valid"`
	Workload  string         `json:"workload"`
	Target    string         `json:"target"`
	Faults    map[string]int `json:"faults"`
	DurationS float64        `json:"duration_s"`
	Events    int            `json:"events"`
	Torn      int            `json:"torn_histories"`
	Checker   string         `json:"checker"`
	OK        int            `json:"ok"`
	Fail      int            `json:"fail"`
	Info      int            `json:"info"`
	Counts    map[string]int `json:"counts"`
	Removed   int            `json:"cells_removed"`
	Out       string         `json:"out"`
	Report    string         `json:"report"`
}

// VerifyVerdict prints a verify run's verdict, as text or JSON.
func VerifyVerdict(w io.Writer, r *verify.Report, jsonOut bool) error {
	if !jsonOut {
		_, err := fmt.Fprint(w, r.Verdict())
		return err
	}
	res := r.Result
	return JSON(w, verifyJSON{Valid: res.Valid, Workload: r.Workload, Target: r.Target, Faults: nonNil(r.Faults),
		DurationS: r.Seconds, Events: r.Events, Torn: r.Torn, Checker: res.Checker, OK: res.OK, Fail: res.Fail,
		Info: res.Info, Counts: nonNil(res.Counts), Removed: r.Removed, Out: r.Out, Report: filepath.Join(r.Out, "report.json")})
}
