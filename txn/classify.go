package txn

import "github.com/seed-992972ee/percolator/storage"

// CAS kinds, as ClassifyCAS names them.
const (
	CASPrewrite = "prewrite"  // a prewrite that wrote its locks
	CASConflict = "conflict"  // a prewrite refused by a lock or a newer write
	CASCommit   = "commit"    // a commit record written (a primary's commit point, or a roll-forward)
	CASRollback = "rollback"  // a rollback record written (a resolution, or a fence)
	CASLost     = "lost"      // a commit or rollback whose lock was already gone
	CASOnePhase = "one-phase" // a one-phase commit (storage.OnePhaser) that applied
	// CASAsyncPrewrite is a row of an async prewrite call
	// (storage.AsyncPrewriter) that wrote its locks.
	CASAsyncPrewrite = "async-prewrite"
)

// ClassifyCAS names the protocol step a CheckAndMutate is, from its
// branches and outcome, for a server's metrics: a server sees storage
// calls, not transactions. It returns "" for a call that is none of them.
func ClassifyCAS(ifTrue, ifFalse []storage.Mutation, matched bool) string {
	switch {
	case len(ifTrue) == 0 && writesFamily(ifFalse, FamilyLock):
		if matched {
			return CASConflict
		}
		return CASPrewrite
	case len(ifTrue) > 0 && writesFamily(ifTrue, FamilyWrite):
		if !matched {
			return CASLost
		}
		return recordKind(ifTrue)
	case len(ifFalse) > 0 && writesFamily(ifFalse, FamilyWrite):
		// A fence (a rollback record written where nothing was found), or
		// commit records sent where no predicate can select anything (an
		// async commit's, deferred).
		if matched {
			return CASLost
		}
		return recordKind(ifFalse)
	}
	return ""
}

// recordKind is CASRollback when ms write a rollback record, CASCommit
// otherwise.
func recordKind(ms []storage.Mutation) string {
	for i := range ms {
		if m := &ms[i]; m.Kind == storage.Put && m.Family == FamilyWrite {
			if w, err := DecodeWrite(m.Value); err == nil && w.Op == OpRollback {
				return CASRollback
			}
		}
	}
	return CASCommit
}

func writesFamily(ms []storage.Mutation, family string) bool {
	for i := range ms {
		if ms[i].Kind == storage.Put && ms[i].Family == family {
			return true
		}
	}
	return false
}
