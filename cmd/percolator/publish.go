package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
)

// A long-running command (index, bank) publishes its status in its
// database directory, every second and at exit, so that `status` can
// report it while the command holds the store (Pebble locks the directory
// even against read-only opens). The file is replaced atomically (a
// temporary file renamed over it), so a reader sees a whole status.
const statusFile = "status.json"

// maxPublishedBad bounds the bad files listed in the status file.
const maxPublishedBad = 1000

// published is the status file's content.
type published struct {
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
	Bad       []badJSON                  `json:"bad_files,omitempty"`
	BadTotal  int                        `json:"bad_total,omitempty"`
	Summary   []string                   `json:"summary,omitempty"`
}

// badJSON is a bad file as printed: its path quoted if it is not
// printable UTF-8.
type badJSON struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// publisher writes a command's status to its directory every second until
// finish. Safe for concurrent use.
type publisher struct {
	path string
	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		p published
	}
}

// startPublishing publishes the status of the command run with args in
// dir, which exists.
func startPublishing(dir string, args []string) *publisher {
	pb := &publisher{stop: make(chan struct{}), done: make(chan struct{})}
	if dir != "" { // "" (a server's database): nowhere to publish
		pb.path = filepath.Join(dir, statusFile)
	}
	now := time.Now()
	pb.mu.p = published{PID: os.Getpid(), Command: "percolator " + strings.Join(args, " "), Started: now, Phase: "starting"}
	pb.write()
	go pb.loop()
	return pb
}

func (pb *publisher) loop() {
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

// set changes the status (published at the next tick).
func (pb *publisher) set(fn func(p *published)) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	fn(&pb.mu.p)
}

// finish publishes the final status, with err if the command failed.
func (pb *publisher) finish(err error) {
	close(pb.stop)
	<-pb.done
	pb.set(func(p *published) {
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
func (pb *publisher) write() {
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

// readPublished reads dir's status file.
func readPublished(dir string) (published, error) {
	var p published
	b, err := os.ReadFile(filepath.Join(dir, statusFile))
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(b, &p)
}

// badList is bad files as published: at most maxPublishedBad.
func badList(bad []badJSON) ([]badJSON, int) {
	return bad[:min(len(bad), maxPublishedBad)], len(bad)
}
