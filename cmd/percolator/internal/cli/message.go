package cli

import (
	"regexp"
	"slices"
	"strings"
)

// internalPackages are the packages whose errors begin "name: " (their
// sentinels keep the prefix, for the API's users and the logs). On the
// command line the prefix says nothing the command's name does not, so
// Message drops it wherever a message or a part it wraps begins. The
// prefixes "bigtable: " and "etcd: " stay: they name the service that
// failed, which the user runs and can look at; but not before their
// packages' "invalid argument", where they name the package.
var internalPackages = []string{
	"percolator", "txn", "storage", "observer", "oracle", "pebble", "memory",
	"coord", "rpc", "remote", "server", "cluster", "docindex", "queue", "lock",
	"graph", "backup", "workload", "bench", "history", "verify", "holding",
	"runstatus", "userstore", "view",
}

// apiAdvice names, in advice written for the Go API, the flag that sets
// the option instead of the option's field.
var apiAdvice = strings.NewReplacer(
	"DialOptions.CAFile", "--tls-ca",
	"Options.TLSCAFile", "--tls-ca",
	"Options.Token", "--token-file",
	"Options.RetryBudget", "--retry-budget",
	"Options.LockTTL", "--lock-ttl",
	"Options.SessionTTL", "--session-ttl",
	"Options.GCLifetime", "--gc-lifetime",
	"Options.DiskReserve", "--disk-reserve",
	"the operation's retry budget (", "the operation's --retry-budget (",
	"within the retry budget (", "within the --retry-budget (",
)

// grpcTransport is how gRPC wraps a failure to connect; the failure
// itself (dial tcp ADDR: connect: connection refused) is what the user
// needs.
var grpcTransport = regexp.MustCompile(`connection error: desc = "transport: (?:Error while dialing: )?([^"]*)"`)

// Message is err as the command named cmd (its path, "percolator queue
// push") prints it after "cmd: ": without the internal packages'
// prefixes, without a part that repeats the one before it or the
// command's own name, and with advice naming flags rather than the Go
// API's fields. Only the text changes: the caller still tests err with
// errors.Is.
func Message(cmd string, err error) string {
	own := strings.TrimSpace(strings.TrimPrefix(cmd, "percolator"))
	msg := grpcTransport.ReplaceAllString(apiAdvice.Replace(err.Error()), "$1")
	lines := strings.Split(msg, "\n")
	for i, line := range lines {
		lines[i] = cleanLine(own, line)
	}
	return strings.Join(lines, "\n")
}

// cleanLine drops from one line of a message, split into its ": "
// parts, the internal packages' names (never the last part: that is what
// happened), a part equal to the one before it, and leading parts that
// name the command again.
func cleanLine(own string, line string) string {
	parts := strings.Split(line, ": ")
	kept := parts[:0]
	for i, p := range parts {
		last := i == len(parts)-1
		switch {
		case !last && slices.Contains(internalPackages, p):
		case !last && (p == "etcd" || p == "bigtable") && parts[i+1] == "invalid argument":
		case len(kept) > 0 && kept[len(kept)-1] == p:
		case len(kept) == 0 && !last && p == own:
		default:
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ": ")
}
