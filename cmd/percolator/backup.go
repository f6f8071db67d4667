package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/backup"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
)

// backupCmd is `backup --out FILE`: every committed cell of one snapshot
// and the observer registrations, written to FILE (package backup).
func backupCmd() *cobra.Command {
	var tg cli.Target
	var out string
	var force, quiet, jsonOut bool
	c := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "write every committed cell of one snapshot, and the observers, to a file",
		Long: `Write every committed cell (row, column, value) of one snapshot of the
database, and its observer registrations, to FILE: a checksummed file that
percolator restore loads into an empty database of any target. The
snapshot is one read-only transaction held open for the whole backup,
which holds the garbage collector back; should it pass the snapshot
anyway, the backup fails. FILE appears complete or not at all: the backup
is written next to it and renamed into place once synced. Not in a
backup: older versions, notifications, observer acks and counters, and the
lock, queue and graph commands' records (docs/backup.md).`,
		Example: `  percolator backup --dir D --out d.pcb
  percolator backup --server 127.0.0.1:7420 --out /backups/today.pcb --json`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if out == "" {
				return cli.Usagef("--out FILE is required")
			}
			if err := tg.Validate(); err != nil {
				return err
			}
			if _, err := os.Lstat(out); err == nil && !force {
				return fmt.Errorf("%s exists: pass --force to replace it", view.Path(out))
			}
			ctx := c.Context()
			meter := progress.New(ctx, c.ErrOrStderr(), quiet)
			o := backup.Options{Overwrite: force, Progress: view.BackupProgress(meter)}
			var s backup.Summary
			err := cli.WithDB(ctx, &tg, func(db *percolator.DB) (err error) {
				s, err = backup.WriteFile(ctx, db, out, o)
				return err
			})
			meter.End(err)
			if err != nil {
				return backupErr(err)
			}
			return printBackup(c, view.NewBackupReport("backup", out, tg.String(), s), jsonOut)
		},
	}
	fs := c.Flags()
	tg.Register(fs, "database directory")
	fs.StringVar(&out, "out", "", "the backup file to write")
	fs.BoolVar(&force, "force", false, "replace FILE if it exists")
	fs.BoolVar(&quiet, "quiet", false, "no progress")
	fs.BoolVar(&jsonOut, "json", false, "print the summary as JSON")
	return c
}

// printBackup prints the summary of backup or restore.
func printBackup(c *cobra.Command, r view.BackupReport, jsonOut bool) error {
	if jsonOut {
		return view.JSON(c.OutOrStdout(), r)
	}
	r.Print(c.OutOrStdout())
	return nil
}

// backupErr is err as the command prints it: without the packages'
// prefixes ("backup: ", and the database's "percolator: " within), and
// ErrExists naming the flag that replaces the file.
func backupErr(err error) error {
	if errors.Is(err, backup.ErrExists) {
		return fmt.Errorf("%w: pass --force to replace it", plainErr{err})
	}
	return plainErr{err}
}

// plainErr prints err's message without the packages' prefixes
// ("backup: ", "percolator: ") wherever a message of theirs begins;
// errors.Is still sees err.
type plainErr struct{ err error }

func (e plainErr) Error() string {
	msg := ": " + e.err.Error()
	for _, p := range []string{"backup: ", "percolator: "} {
		msg = strings.ReplaceAll(msg, ": "+p, ": ")
	}
	return msg[2:]
}

func (e plainErr) Unwrap() error { return e.err }
