package txn

// SetCrashHook installs the commit's crash hook (Client.crash) for the
// external tests (package txn_test), which cannot import the server from
// inside package txn: the server imports txn. hook returns true to stop
// the commit at the named point, as if the process died there. Set it
// before the client's first commit; with a hook set, secondary prewrites
// run one after another in the caller's goroutine.
func SetCrashHook(c *Client, hook func(point string) bool) { c.crash = hook }

// The crash points the external tests' hooks name.
const (
	CrashAfterPrimaryPrewrite = crashAfterPrimaryPrewrite
	CrashAfterSessionCheck    = crashAfterSessionCheck
	CrashAfterPrimaryCommit   = crashAfterPrimaryCommit
	CrashAfterPush            = crashAfterPush
	CrashAfterOnePhase        = crashAfterOnePhase
	CrashAfterAsyncPrewrite   = crashAfterAsyncPrewrite
	CrashBetweenAsync         = crashBetweenAsyncPrewrites
)

// AwaitBackground waits for c's async commits' records (Client.Close
// waits too, and detaches the client).
func AwaitBackground(c *Client) { c.background.Wait() }

// StampNoCommits makes c take its commit timestamps itself over a server,
// as against a server older than CommitInEpoch.
func StampNoCommits(c *Client) { c.noEpochStamp.Store(true) }
