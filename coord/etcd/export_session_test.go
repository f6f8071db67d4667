package etcd

// PauseRenewals stops (on) or resumes the session's renewals, as if the
// process were stopped: its lease runs out while it still holds its
// locks and memberships.
func PauseRenewals(s *Session, on bool) { s.paused.Store(on) }

// SetFreeAddr replaces the port picker of StartEmbedded until the test
// ends.
func SetFreeAddr(t interface{ Cleanup(func()) }, pick func() (string, error)) {
	old := freeAddr
	freeAddr = pick
	t.Cleanup(func() { freeAddr = old })
}
