package main

//go:generate go run . gen-docs ../../docs/cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
)

// docsDir is where the repository keeps the command reference, and
// regenerateDocs the command that writes it there, from the root of the
// repository (go generate ./cmd/percolator does the same).
const (
	docsDir        = "docs/cli"
	regenerateDocs = "go run ./cmd/percolator gen-docs " + docsDir
)

// genDocsCmd is `gen-docs DIR`, hidden: the reference of every command in
// Markdown, one file per command, into DIR.
func genDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "gen-docs DIR",
		Short: "write the Markdown reference of every command into DIR (the repository keeps it in " + docsDir + ")",
		Long: `Write the Markdown reference of every command into DIR, one file per
command (percolator_queue_push.md), generated from the commands' help by
github.com/spf13/cobra/doc, and remove the percolator*.md files there of
commands that no longer exist. The output depends on nothing but the
commands: no date, no machine.`,
		Example: "  " + regenerateDocs,
		Hidden:  true,
		Args:    cli.ArgsBetween(1, 1, "one DIR"),
		RunE: func(c *cobra.Command, args []string) error {
			n, err := genDocs(args[0])
			if err == nil {
				fmt.Fprintf(c.OutOrStdout(), "%d files in %s\n", n, args[0])
			}
			return err
		},
	}
}

// genDocs writes the reference of the command tree into dir (created if
// need be), removes the percolator*.md files there that it did not
// write, and returns how many it wrote.
func genDocs(dir string) (int, error) {
	files, err := renderDocs()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return 0, err
		}
	}
	old, err := filepath.Glob(filepath.Join(dir, "percolator*.md"))
	for _, p := range old {
		if _, ok := files[filepath.Base(p)]; !ok && err == nil {
			err = os.Remove(p)
		}
	}
	return len(files), err
}

// renderDocs is the reference of a fresh command tree: file name to
// Markdown.
func renderDocs() (map[string][]byte, error) {
	root := newRoot(nil)
	root.Long += "\n\n" + cli.ExitStatuses // its usage says so at the end, which the reference does not print
	files := map[string][]byte{}
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if !c.IsAvailableCommand() && c != root {
			return nil
		}
		c.DisableAutoGenTag = true // no date: the same commands give the same files
		var b bytes.Buffer
		if err := doc.GenMarkdown(c, &b); err != nil {
			return err
		}
		files[strings.ReplaceAll(c.CommandPath(), " ", "_")+".md"] = b.Bytes()
		for _, s := range c.Commands() {
			if err := walk(s); err != nil {
				return err
			}
		}
		return nil
	}
	return files, walk(root)
}
