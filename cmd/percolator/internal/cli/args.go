package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// NoArgs refuses arguments: a usage error.
func NoArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected arguments %q", args)
	}
	return nil
}

// ArgsBetween wants from lo to hi arguments (hi < 0: no limit), named
// what in the message.
func ArgsBetween(lo, hi int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < lo || hi >= 0 && len(args) > hi {
			return Usagef("want %s, got %d arguments %q", what, len(args), args)
		}
		return nil
	}
}

// FlagError is the usage error of a command line its flags refuse. A
// value a flag cannot parse is named with the flag, and what the flag
// takes said instead of the parser's message ("strconv.ParseInt: ...").
func FlagError(_ *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return UsageError{err.Error()}
	}
	f := ive.GetFlag()
	return UsageError{fmt.Sprintf("--%s %q: %s", f.Name, ive.GetValue(), wants(f.Value.Type(), ive.Unwrap()))}
}

// wants says what a flag of type typ takes, given why it refused a value.
func wants(typ string, cause error) string {
	var ne *strconv.NumError
	switch {
	case typ == "duration":
		return "want a duration such as 500ms, 30s or 2m"
	case typ == "bool":
		return "want true or false"
	case errors.As(cause, &ne) && errors.Is(ne.Err, strconv.ErrRange):
		return "out of range"
	case errors.As(cause, &ne) && strings.HasPrefix(typ, "float"):
		return "want a number"
	case errors.As(cause, &ne):
		return "want a whole number"
	}
	return cause.Error()
}

// RunUnknown runs when no command was named, or an unknown one: the
// usage on stderr, and a usage error.
func RunUnknown(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		c.SetOut(c.ErrOrStderr())
		_ = c.Usage()
		return UsageError{}
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return UsageError{msg}
}

// GroupRun runs a command family named without one of its commands:
// `help` prints its usage, anything else is a usage error.
func GroupRun(c *cobra.Command, args []string) error {
	if len(args) == 1 && args[0] == "help" {
		return c.Help()
	}
	c.SetOut(c.ErrOrStderr())
	_ = c.Usage()
	if len(args) == 0 {
		return Usagef("a command is required")
	}
	return Usagef("unknown command %q", args[0])
}

// ExitStatuses says what percolator's exit statuses mean.
const ExitStatuses = "Exit status: 0 success, 1 failed check or run-time failure, 2 usage error, 130 interrupted (143 on SIGTERM)."

// Usage prints a command's usage line, examples, commands and flags.
func Usage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprintf(w, "usage: %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(w, "\nexamples:\n%s\n", c.Example)
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintln(w, "\ncommands:")
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() || s.Name() == "help" {
				fmt.Fprintf(w, "  %-*s %s\n", s.NamePadding(), s.Name(), s.Short)
			}
		}
	}
	printFlags(w, "flags", c.LocalFlags())
	if c.HasParent() {
		printFlags(w, "flags of every "+c.Parent().CommandPath()+" command", c.InheritedFlags())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", c.CommandPath())
	}
	if !c.HasParent() {
		fmt.Fprintln(w, ExitStatuses)
	}
	return nil
}

func printFlags(w io.Writer, title string, fs *pflag.FlagSet) {
	if fs.HasAvailableFlags() {
		fmt.Fprintf(w, "\n%s:\n%s", title, fs.FlagUsages())
	}
}

// WithTwoDashes rewrites -name and -name=value, where name is a long
// flag of the command tree, to --name: the commands were first written
// with the flag package, which takes long flags after one dash too, and
// scripts may pass them so. Arguments after "--" are left alone.
func WithTwoDashes(root *cobra.Command, args []string) []string {
	names := longFlags(root)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && names[name] {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// longFlags are the names of the flags of c and of every command below.
func longFlags(c *cobra.Command) map[string]bool {
	names := map[string]bool{"help": true, "version": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(c)
	return names
}
