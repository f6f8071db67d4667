package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// ExitCode is the exit status of a command run for the user (lock
// acquire -- COMMAND), passed on as percolator's own.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ErrFailed marks a run whose check failed: exit 1.
var ErrFailed = errors.New("check failed")

// ErrDrained: a long-running command (serve, worker, oracle) stopped
// cleanly on a signal: exit 0.
var ErrDrained = errors.New("stopped cleanly")

// UsageError is a wrong command line: exit 2. An empty message means the
// usage was already printed.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, a ...any) error { return UsageError{fmt.Sprintf(format, a...)} }

// Interrupted is the cause of the context's end when a signal ended the
// run.
type Interrupted struct{ Sig syscall.Signal }

func (i Interrupted) Error() string {
	switch i.Sig {
	case syscall.SIGINT:
		return "interrupted"
	case syscall.SIGTERM:
		return "interrupted (SIGTERM)"
	}
	return "interrupted by signal " + i.Sig.String()
}

// exitCode is the conventional status of a process ended by the signal.
func (i Interrupted) exitCode() int { return 128 + int(i.Sig) }

// WithSignals returns a context that SIGINT or SIGTERM ends, its cause
// an Interrupted. Only the first signal is caught: a second kills at
// once.
func WithSignals(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel(Interrupted{sig.(syscall.Signal)})
		signal.Stop(sigs)
	}()
	return ctx
}

// ExitStatus prints err (if any) on stderr, named after the command c
// that ran, and maps it to the exit status.
func ExitStatus(ctx context.Context, c *cobra.Command, err error, stderr io.Writer) int {
	name := "percolator"
	if c != nil {
		name = c.CommandPath()
	}
	var ue UsageError
	var sig Interrupted
	var ce ExitCode
	switch {
	case errors.Is(err, ErrDrained):
		return 0
	case errors.As(err, &ce):
		return int(ce) // a command run for the user ended so: its status
	case errors.As(context.Cause(ctx), &sig):
		fmt.Fprintf(stderr, "%s: %v\n", name, sig)
		return sig.exitCode()
	case err == nil:
		return 0
	case errors.As(err, &ue):
		if ue.Msg != "" {
			fmt.Fprintf(stderr, "%s: %s\nRun '%s -h' for usage.\n", name, Message(name, ue), name)
		}
		return 2
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, Message(name, err))
	return 1
}

// rephrased is an error told in the command line's words: Error is msg,
// and errors.Is and errors.As still find err.
type rephrased struct {
	msg string
	err error
}

func (r rephrased) Error() string { return r.msg }
func (r rephrased) Unwrap() error { return r.err }

// Rephrase is err with the message format says instead of its own.
func Rephrase(err error, format string, a ...any) error {
	return rephrased{fmt.Sprintf(format, a...), err}
}
