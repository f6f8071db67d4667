// Package runstatus is the status a long-running command of percolator
// (index, bank) publishes in its database directory, every second and at
// exit, so that percolator status can report it while the command holds
// the store (Pebble locks the directory even against read-only opens).
// The file (status.json) is replaced atomically (a temporary file renamed
// over it), so a reader sees a whole status.
package runstatus

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
)

// File is the status file's name in the database directory.
const File = "status.json"

// maxBad bounds the bad files listed in the status file.
const maxBad = 1000

// Status is the status file's content.
type Status struct {
	PID      int       `json:"pid"`
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
	Finished bool      `json:"finished"`
	Error    string    `json:"error,omitempty"`
	// Phase is what the command is doing ("loading", "observers", ...)
	// and Progress how far it got, in words.
	Phase     string                     `json:"phase"`
	Progress  string                     `json:"progress,omitempty"`
	Observers *percolator.ObserverStatus `json:"observers,omitempty"`
	Bad       []Bad                      `json:"bad_files,omitempty"`
	BadTotal  int                        `json:"bad_total,omitempty"`
	Summary   []string                   `json:"summary,omitempty"`
}

// Bad is a bad file as printed: its path quoted if it is not printable
// UTF-8.
type Bad struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Publisher writes a command's status to its directory every second
// until Finish. Safe for concurrent use.
type Publisher struct {
	path string
	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		p Status
	}
}

// Start publishes the status of the command run with args (its command
// line, without the program's name) in dir, which exists; "" (a server's
// database) publishes nowhere.
func Start(dir string, args []string) *Publisher {
	pb := &Publisher{stop: make(chan struct{}), done: make(chan struct{})}
	if dir != "" { // "" (a server's database): nowhere to publish
		pb.path = filepath.Join(dir, File)
	}
	now := time.Now()
	pb.mu.p = Status{PID: os.Getpid(), Command: "percolator " + strings.Join(args, " "), Started: now, Phase: "starting"}
	pb.write()
	go pb.loop()
	return pb
}

func (pb *Publisher) loop() {
	defer close(pb.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-pb.stop:
			return
		case <-t.C:
			pb.write()
		}
	}
}

// Set changes the status (published at the next tick).
func (pb *Publisher) Set(fn func(p *Status)) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	fn(&pb.mu.p)
}

// Finish publishes the final status, with err if the command failed.
func (pb *Publisher) Finish(err error) {
	close(pb.stop)
	<-pb.done
	pb.Set(func(p *Status) {
		p.Finished = true
		p.Phase = "finished"
		if err != nil {
			p.Error = err.Error()
		}
	})
	pb.write()
}

// write replaces the status file; a status that cannot be written is not
// worth failing the command for.
func (pb *Publisher) write() {
	pb.mu.Lock()
	pb.mu.p.Updated = time.Now()
	b, err := json.MarshalIndent(pb.mu.p, "", "  ")
	pb.mu.Unlock()
	if err != nil || pb.path == "" {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(pb.path), ".status-*.tmp")
	if err != nil {
		return
	}
	_, werr := tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), pb.path) != nil {
		_ = os.Remove(tmp.Name())
	}
}

// Read reads dir's status file.
func Read(dir string) (Status, error) {
	var p Status
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(b, &p)
}

// BadList is bad files as published: at most 1,000, and how many there
// were.
func BadList(bad []Bad) ([]Bad, int) {
	return bad[:min(len(bad), maxBad)], len(bad)
}

// Running is the status that the live process running in dir (an
// index or a bank) publishes, and whether there is one.
func Running(dir string) (Status, bool) {
	p, err := Read(dir)
	if err != nil || p.Finished || !Alive(p.PID) {
		return Status{}, false
	}
	return p, true
}
