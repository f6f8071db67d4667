package main

import (
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/spf13/cobra"
)

// completionCmd is `completion bash|zsh|fish`: the shell's completion
// script for percolator, on stdout.
func completionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "print the shell completion script for bash, zsh or fish",
		Long: `Print the completion script of percolator's commands and flags for a shell.
Load it in the current shell with: source <(percolator completion bash)`,
		Example: `  percolator completion bash > /etc/bash_completion.d/percolator
  percolator completion zsh > "${fpath[1]}/_percolator"
  percolator completion fish > ~/.config/fish/completions/percolator.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh" && args[0] != "fish") {
				return cli.Usagef("want one shell: bash, zsh or fish; got %q", args)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			root, w := c.Root(), c.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			}
			return root.GenFishCompletion(w, true)
		},
	}
}
