package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/backup"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
)

// restoreCmd is `restore FILE`: a backup loaded into an empty database
// (package backup).
func restoreCmd() *cobra.Command {
	var tg cli.Target
	var quiet, jsonOut bool
	c := &cobra.Command{
		Use:   "restore FILE",
		Short: "load a backup into an empty database",
		Long: `Load the cells and observer registrations of a backup (percolator backup)
into an empty database of any target: a directory (created if needed), a
server, or Bigtable with etcd. The whole file is checked first (its
checksum, and every cell against the database's limits); a corrupt or
truncated file, or a database that holds any cell or observer, is refused
and nothing is written. The observers are then registered without code
and the cells committed in transactions, several at a time: each
restored cell of an observed column is notified, and its observers run
on it once a process registers their code. A restore cut short leaves
what it committed: restore into a fresh database again (docs/backup.md).`,
		Example: `  percolator restore --dir D2 d.pcb
  percolator restore --bigtable P/I/T --etcd 127.0.0.1:2379 /backups/today.pcb --json`,
		Args: cli.ArgsBetween(1, 1, "the backup FILE"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := tg.Validate(); err != nil {
				return err
			}
			meter := progress.New(c.Context(), c.ErrOrStderr(), quiet)
			s, err := runRestore(c.Context(), &tg, args[0], view.BackupProgress(meter))
			meter.End(err)
			if err != nil {
				return backupErr(err)
			}
			return printBackup(c, view.NewBackupReport("restore", args[0], tg.String(), s), jsonOut)
		},
	}
	fs := c.Flags()
	tg.Register(fs, "database directory (created if needed)")
	fs.BoolVar(&quiet, "quiet", false, "no progress")
	fs.BoolVar(&jsonOut, "json", false, "print the summary as JSON")
	return c
}

// runRestore restores file into the target's database. The file is
// verified before the database is opened, so a bad file creates no
// directory.
func runRestore(ctx context.Context, tg *cli.Target, file string, prog func(backup.Progress)) (backup.Summary, error) {
	f, err := os.Open(file)
	if err != nil {
		return backup.Summary{}, err
	}
	defer f.Close()
	if _, err := backup.Verify(f, backup.ReadOptions{}); err != nil {
		return backup.Summary{}, fmt.Errorf("%s: %w", view.Path(file), err)
	}
	db, err := tg.Open(ctx, true)
	if err != nil {
		return backup.Summary{}, err
	}
	s, err := backup.Restore(ctx, db, f, backup.RestoreOptions{Progress: prog})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return s, err
}
