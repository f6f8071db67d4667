package txn

import "fmt"

// FormatCell renders a protocol cell for humans (percolator dump and the
// test scenarios), in the vocabulary of the paper's tables: data cells show
// their value, lock cells whether they are the primary or point at it,
// write cells the start_ts their data is at.
func FormatCell(family string, value []byte) string {
	switch family {
	case FamilyLock:
		l, err := DecodeLock(value)
		if err != nil {
			return "lock:<corrupt>"
		}
		return "lock:" + formatLock(&l)
	case FamilyWrite:
		w, err := DecodeWrite(value)
		if err != nil {
			return "write:<corrupt>"
		}
		return "write:" + formatWrite(&w)
	}
	return fmt.Sprintf("%s:%q", family, value)
}

func formatLock(l *Lock) string {
	s := fmt.Sprintf("%s primary@%s/%s owner=%s", l.Op, l.PrimaryRow, l.PrimaryCol, l.Owner)
	if l.Inline {
		s += fmt.Sprintf(" value=%q", l.Value)
	}
	return s
}

func formatWrite(w *Write) string {
	if w.Op == OpRollback {
		return "rollback"
	}
	s := fmt.Sprintf("%s data@%d", w.Op, w.StartTS)
	if w.Inline {
		s += fmt.Sprintf(" value=%q", w.Value)
	}
	return s
}
