package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/docindex"
)

// indexQueryCmd is `index query WORD`: the canonical documents with WORD,
// and their titles. tg and jsonOut are index's flags, which it inherits.
func indexQueryCmd(tg *target, jsonOut *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "query WORD",
		Short: "the canonical documents with WORD, and their titles",
		Long: `List the canonical documents holding WORD, with their titles. To index a
directory named query, write ./query, or put it after "--".`,
		Example: "  percolator index --dir D query closure\n  percolator index --server 127.0.0.1:7420 --json query closure",
		Args:    argsBetween(1, 1, "one WORD (a directory named query is indexed as ./query, or after --)"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := tg.validate(); err != nil {
				return err
			}
			ctx := c.Context()
			return withDB(ctx, tg, func(db *percolator.DB) error { return printQuery(ctx, db, args[0], *jsonOut, c.OutOrStdout()) })
		},
	}
}

func printQuery(ctx context.Context, db *percolator.DB, word string, jsonOut bool, stdout io.Writer) error {
	paths, err := docindex.Query(ctx, db, word)
	if err != nil {
		return err
	}
	type hit struct {
		Path  string `json:"path"`
		Title string `json:"title"`
	}
	hits := []hit{}
	for _, p := range paths {
		title, err := docindex.Title(ctx, db, p)
		if err != nil {
			return err
		}
		hits = append(hits, hit{displayPath(p), displayText(title)})
	}
	if jsonOut {
		return writeJSON(stdout, hits)
	}
	if len(hits) == 0 {
		fmt.Fprintf(stdout, "no document has %q\n", word)
	}
	for _, h := range hits {
		fmt.Fprintf(stdout, "%s\t%s\n", h.Path, h.Title)
	}
	return nil
}
