package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// Limits every backend enforces, so that a key accepted here is accepted
// by every backend (Bigtable allows 4 KiB row keys).
const (
	MaxRowKeySize    = 4096
	MaxFamilySize    = 64
	MaxQualifierSize = 16 * 1024
)

// ValidateRow checks a row key.
func ValidateRow(row []byte) error {
	if len(row) == 0 {
		return fmt.Errorf("%w: empty row key", ErrInvalidArgument)
	}
	if len(row) > MaxRowKeySize {
		return fmt.Errorf("%w: row key of %d bytes exceeds %d", ErrInvalidArgument, len(row), MaxRowKeySize)
	}
	return nil
}

func validateColumn(family, qualifier string) error {
	if err := ValidateFamily(family); err != nil {
		return err
	}
	if len(qualifier) > MaxQualifierSize {
		return fmt.Errorf("%w: qualifier of %d bytes exceeds %d", ErrInvalidArgument, len(qualifier), MaxQualifierSize)
	}
	return nil
}

// ValidateFamily checks a family name.
func ValidateFamily(family string) error {
	if family == "" || len(family) > MaxFamilySize {
		return fmt.Errorf("%w: family %q must have 1 to %d bytes", ErrInvalidArgument, family, MaxFamilySize)
	}
	for i := 0; i < len(family); i++ {
		if family[i] == 0 {
			return fmt.Errorf("%w: family %q contains NUL", ErrInvalidArgument, family)
		}
	}
	return nil
}

// ValidateFilter checks a filter.
func ValidateFilter(f Filter) error {
	for i := range f {
		s := &f[i]
		if err := validateColumn(s.Family, s.Qualifier); err != nil {
			return err
		}
		if s.AllQualifiers && s.Qualifier != "" {
			return fmt.Errorf("%w: selector sets both Qualifier and AllQualifiers", ErrInvalidArgument)
		}
		if s.Limit < 0 {
			return fmt.Errorf("%w: negative limit %d", ErrInvalidArgument, s.Limit)
		}
		if s.Time.End != 0 && s.Time.End < s.Time.Start {
			return fmt.Errorf("%w: time range end %d before start %d", ErrInvalidArgument, s.Time.End, s.Time.Start)
		}
	}
	return nil
}

// ValidateMutations checks mutations of one row.
func ValidateMutations(ms []Mutation) error {
	for i := range ms {
		m := &ms[i]
		switch m.Kind {
		case Put:
			if m.TS > MaxTimestamp {
				return fmt.Errorf("%w: timestamp %d exceeds MaxTimestamp", ErrInvalidArgument, m.TS)
			}
			if err := validateColumn(m.Family, m.Qualifier); err != nil {
				return err
			}
		case DeleteCells:
			if err := validateColumn(m.Family, m.Qualifier); err != nil {
				return err
			}
			if m.Time.End != 0 && m.Time.End < m.Time.Start {
				return fmt.Errorf("%w: time range end %d before start %d", ErrInvalidArgument, m.Time.End, m.Time.Start)
			}
		case DeleteRow:
		default:
			return fmt.Errorf("%w: unknown mutation kind %d", ErrInvalidArgument, m.Kind)
		}
	}
	return nil
}

// The checks below are what every backend runs on entry, so that all of
// them refuse the same input the same way. Each returns ctx's error first.

// CheckRead checks a ReadRow call.
func CheckRead(ctx context.Context, row []byte, filter Filter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateRow(row); err != nil {
		return err
	}
	return ValidateFilter(filter)
}

// CheckWrite checks a one-row write.
func CheckWrite(ctx context.Context, row []byte, mutations []Mutation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateRow(row); err != nil {
		return err
	}
	return ValidateMutations(mutations)
}

// CheckScan checks a Scan call: start after end or a negative limit is
// invalid.
func CheckScan(start, end []byte, filter Filter, limit int) error {
	if len(end) > 0 && bytes.Compare(start, end) > 0 {
		return fmt.Errorf("%w: scan start %q after end %q", ErrInvalidArgument, start, end)
	}
	if limit < 0 {
		return fmt.Errorf("%w: negative scan limit %d", ErrInvalidArgument, limit)
	}
	return ValidateFilter(filter)
}

// CheckRowChecks validates a batch of row checks and the rows then
// writes alongside them: each row valid, named once across both, each
// predicate and branch valid.
func CheckRowChecks(ctx context.Context, checks []RowCheck, then []RowMutation) error {
	seen := make(map[string]struct{}, len(checks)+len(then))
	once := func(i int, row []byte) error {
		if _, dup := seen[string(row)]; dup {
			return fmt.Errorf("%w: row %s named twice in one batch (check %d)", ErrInvalidArgument, QuoteRow(row), i)
		}
		seen[string(row)] = struct{}{}
		return nil
	}
	for i := range checks {
		ch := &checks[i]
		if err := CheckRead(ctx, ch.Row, ch.Predicate); err != nil {
			return fmt.Errorf("check %d: %w", i, err)
		}
		if err := ValidateFilter(ch.Unless); err != nil {
			return fmt.Errorf("check %d unless: %w", i, err)
		}
		if err := errors.Join(ValidateMutations(ch.IfTrue), ValidateMutations(ch.IfFalse)); err != nil {
			return fmt.Errorf("check %d: %w", i, err)
		}
		if err := once(i, ch.Row); err != nil {
			return err
		}
	}
	for i := range then {
		if err := CheckWrite(ctx, then[i].Row, then[i].Mutations); err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		if err := once(len(checks)+i, then[i].Row); err != nil {
			return err
		}
	}
	return nil
}

// CheckStamped validates an EpochStamper commit's stamped mutations:
// at least one, puts only, each of check's row or of a row of then, no
// row twice.
func CheckStamped(check RowCheck, then, stamped []RowMutation) error {
	if len(stamped) == 0 {
		return fmt.Errorf("%w: a stamped commit with nothing to stamp", ErrInvalidArgument)
	}
	rows := make(map[string]bool, len(then)+1)
	rows[string(check.Row)] = false
	for _, rm := range then {
		rows[string(rm.Row)] = false
	}
	for i, rm := range stamped {
		done, ok := rows[string(rm.Row)]
		switch {
		case !ok:
			return fmt.Errorf("%w: stamped row %d (%s) is neither the check's row nor one of then's", ErrInvalidArgument, i, QuoteRow(rm.Row))
		case done:
			return fmt.Errorf("%w: stamped row %s named twice", ErrInvalidArgument, QuoteRow(rm.Row))
		}
		rows[string(rm.Row)] = true
		if err := ValidateMutations(rm.Mutations); err != nil {
			return fmt.Errorf("stamped row %d: %w", i, err)
		}
		for _, m := range rm.Mutations {
			if m.Kind != Put {
				return fmt.Errorf("%w: a stamped commit stamps puts only, not %v", ErrInvalidArgument, m.Kind)
			}
		}
	}
	return nil
}

// CheckAsyncChecks validates an async prewrite's checks
// (AsyncPrewriter): at least one, each a valid read and valid
// mutations, every stamped one a put whose value holds a stamp, and no
// row named twice.
func CheckAsyncChecks(ctx context.Context, checks []AsyncCheck) error {
	if len(checks) == 0 {
		return fmt.Errorf("%w: an async prewrite of no row", ErrInvalidArgument)
	}
	seen := make(map[string]struct{}, len(checks))
	for i := range checks {
		ch := &checks[i]
		if err := CheckRead(ctx, ch.Row, ch.Predicate); err != nil {
			return fmt.Errorf("check %d: %w", i, err)
		}
		if err := errors.Join(ValidateMutations(ch.Mutations), ValidateMutations(ch.Stamped)); err != nil {
			return fmt.Errorf("check %d: %w", i, err)
		}
		for _, m := range ch.Stamped {
			if m.Kind != Put || len(m.Value) < StampSize {
				return fmt.Errorf("%w: check %d: a stamped mutation must be a put whose value holds a %d-byte stamp", ErrInvalidArgument, i, StampSize)
			}
		}
		if _, dup := seen[string(ch.Row)]; dup {
			return fmt.Errorf("%w: row %s named twice in one batch (check %d)", ErrInvalidArgument, QuoteRow(ch.Row), i)
		}
		seen[string(ch.Row)] = struct{}{}
	}
	return nil
}
