package runstatus

import (
	"errors"
	"os"
	"testing"
)

// TestPublish: a publisher writes its status at once and at Finish, with
// the error it finished with; a finished status names no live holder;
// a directory without one reads as not existing.
func TestPublish(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Read of an empty directory: %v", err)
	}
	pb := Start(dir, []string{"index", "--dir", dir, "src"})
	p, err := Read(dir)
	if err != nil || p.PID != os.Getpid() || p.Phase != "starting" || p.Command != "percolator index --dir "+dir+" src" || p.Finished {
		t.Fatalf("started: %+v, %v", p, err)
	}
	if r, ok := Running(dir); !ok || r.PID != os.Getpid() {
		t.Fatalf("Running while running: %+v, %v", r, ok)
	}
	pb.Set(func(s *Status) { s.Phase, s.Summary = "loading", []string{"a line"} })
	pb.Finish(errors.New("disk full"))
	p, err = Read(dir)
	if err != nil || !p.Finished || p.Error != "disk full" || p.Summary[0] != "a line" {
		t.Fatalf("finished: %+v, %v", p, err)
	}
	if r, ok := Running(dir); ok {
		t.Fatalf("Running after finishing: %+v", r)
	}
	Start("", []string{"bank"}).Finish(nil) // a server's database: nowhere to publish
}

// TestBadList: the status file lists at most 1,000 bad files, and counts
// them all.
func TestBadList(t *testing.T) {
	bad := make([]Bad, 1500)
	listed, n := BadList(bad)
	if len(listed) != 1000 || n != 1500 {
		t.Fatalf("BadList of 1,500: %d listed, %d counted", len(listed), n)
	}
}
