package cli

import (
	"io"
	"log/slog"

	"github.com/spf13/pflag"
)

// LogFlags are the long-running commands' logging flags (serve, oracle),
// defined once.
type LogFlags struct {
	format  string
	verbose bool
}

// Register adds --log-format and -v to fs.
func (l *LogFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "text", "log format on stderr: text or json")
	fs.BoolVarP(&l.verbose, "v", "v", false, "log debug messages")
}

func (l *LogFlags) Validate() error {
	if l.format != "text" && l.format != "json" {
		return Usagef("--log-format is text or json")
	}
	return nil
}

// Logger is the structured logger on stderr of the long-running
// commands.
func (l *LogFlags) Logger(stderr io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if l.verbose {
		level = slog.LevelDebug
	}
	hopts := &slog.HandlerOptions{Level: level}
	if l.format == "json" {
		return slog.New(slog.NewJSONHandler(stderr, hopts))
	}
	return slog.New(slog.NewTextHandler(stderr, hopts))
}
