package view

import (
	"encoding/hex"
	"fmt"
	"io"

	"github.com/seed-992972ee/percolator/backup"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
)

// BackupReport is what backup and restore print once done: the file, the
// target, the snapshot (its start_ts and when the backup began), what
// the file holds, its SHA-256 (as its trailer has it), and how long the
// command's work took. --json prints it as it is.
type BackupReport struct {
	Command   string  `json:"command"` // backup or restore
	File      string  `json:"file"`
	Target    string  `json:"target"`
	StartTS   uint64  `json:"start_ts"`
	Time      string  `json:"time"` // RFC 3339
	Cells     int64   `json:"cells"`
	Observers int64   `json:"observers"`
	Bytes     int64   `json:"bytes"`
	SHA256    string  `json:"sha256"`
	ElapsedS  float64 `json:"elapsed_s"`
	CellsPerS float64 `json:"cells_per_s"`
	BytesPerS float64 `json:"bytes_per_s"`
}

// NewBackupReport is the report of command on file and target.
func NewBackupReport(command, file, target string, s backup.Summary) BackupReport {
	secs := s.Elapsed.Seconds()
	r := BackupReport{Command: command, File: file, Target: target, StartTS: s.StartTS, Time: Time(s.Time),
		Cells: s.Cells, Observers: s.Observers, Bytes: s.Bytes, SHA256: hex.EncodeToString(s.Checksum[:]), ElapsedS: secs}
	if secs > 0 {
		r.CellsPerS, r.BytesPerS = float64(s.Cells)/secs, float64(s.Bytes)/secs
	}
	return r
}

// Print prints the report as text.
func (r BackupReport) Print(w io.Writer) {
	if r.Command == "restore" {
		fmt.Fprintf(w, "restored %s into %s: %d cells, %d observers of the snapshot at %d (%s)\n",
			Path(r.File), r.Target, r.Cells, r.Observers, r.StartTS, r.Time)
	} else {
		fmt.Fprintf(w, "backup of %s at snapshot %d (%s): %d cells, %d observers\nwrote %s\n",
			r.Target, r.StartTS, r.Time, r.Cells, r.Observers, Path(r.File))
	}
	fmt.Fprintf(w, "%s in %.2fs (%.0f cells/s, %s/s)\nsha256 %s\n",
		Bytes(r.Bytes), r.ElapsedS, r.CellsPerS, Bytes(int64(r.BytesPerS)), r.SHA256)
	if r.Command == "restore" && r.Observers > 0 {
		fmt.Fprintln(w, "the observers are registered without code, and every restored cell of an observed column is notified: each observer runs on each once a process registers its code")
	}
}

// BackupProgress shows a backup's or a restore's progress on m, a phase
// of the meter per phase of the command: the cells a backup wrote (its
// length unknown), the bytes of the file a restore checked, then loaded
// (of the file's size). The caller ends the last phase (m.End).
func BackupProgress(m *progress.Meter) func(backup.Progress) {
	phase := ""
	return func(p backup.Progress) {
		label, total := backupLabel(p.Phase), p.Total
		if p.Phase == "backup" {
			total = progress.Unknown
		}
		if p.Phase != phase {
			phase = p.Phase
			m.Start(label, total) // ends the phase before, which completed
		}
		if p.Phase == "backup" {
			m.Detail(p.Cells, Bytes(p.Bytes)+" written")
		} else {
			m.Detail(p.Bytes, fmt.Sprintf("%d cells", p.Cells))
		}
	}
}

// backupLabel names what a phase of a backup or a restore counts.
func backupLabel(phase string) string {
	switch phase {
	case "backup":
		return "backup: cells written"
	case "check":
		return "checking the file: bytes"
	default:
		return "restoring: bytes loaded"
	}
}

// Bytes is n bytes in the largest binary unit under which it is at least
// 1 (B, KiB, MiB, GiB, TiB).
func Bytes(n int64) string {
	const units = "KMGT"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
