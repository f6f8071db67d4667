package view

import (
	"fmt"
	"io"
	"time"

	"github.com/seed-992972ee/percolator/queue"
)

// QueueStats prints a queue's counts (queue.Queue.Stats) as text or
// JSON.
func QueueStats(w io.Writer, s queue.Stats, jsonOut bool) error {
	if jsonOut {
		return JSON(w, struct {
			Depth    int     `json:"depth"`
			InFlight int     `json:"in_flight"`
			OldestS  float64 `json:"oldest_s"`
			Dead     int     `json:"dead"`
			Retained int     `json:"retained"`
			Now      string  `json:"now"`
		}{s.Depth, s.InFlight, Seconds(s.Oldest), s.Dead, s.Retained, Time(s.Now)})
	}
	_, err := fmt.Fprintf(w, "depth %d\nin-flight %d\noldest %s\ndead %d\n", s.Depth, s.InFlight, s.Oldest.Round(time.Millisecond), s.Dead)
	return err
}

// itemJSON is a queue item as `queue dead --json` and `queue consume
// --json` print it.
type itemJSON struct {
	ID         string    `json:"id"`
	Body       UserBytes `json:"body"`
	Deliveries int       `json:"deliveries"`
	PushedAt   string    `json:"pushed_at"`
}

func (i itemJSON) MarshalJSON() ([]byte, error) { return marshalFlat(i) }

// DeadLetters prints the dead letters (queue.Queue.Dead): a line of ID,
// deliveries and body each, or JSON.
func DeadLetters(w io.Writer, dead []queue.DeadLetter, jsonOut bool) error {
	if jsonOut {
		list := []itemJSON{}
		for _, d := range dead {
			list = append(list, itemJSON{d.ID, d.Body, d.Deliveries, Time(d.PushedAt)})
		}
		return JSON(w, list)
	}
	for _, d := range dead {
		fmt.Fprintf(w, "%s\t%d\t%s\n", d.ID, d.Deliveries, d.Body)
	}
	return nil
}

// Delivery prints a consumed item: its body on its own line, or JSON on
// one line.
func Delivery(w io.Writer, d *queue.Delivery, jsonOut bool) error {
	if jsonOut {
		return JSONLine(w, itemJSON{d.ID, d.Body, d.Deliveries, Time(d.PushedAt)})
	}
	_, err := fmt.Fprintf(w, "%s\n", d.Body)
	return err
}

// RequeuedItems prints the dead letters `queue dead --requeue` put back, by
// ID, as lines or JSON.
func RequeuedItems(w io.Writer, ids []string, jsonOut bool) error {
	if jsonOut {
		if ids == nil {
			ids = []string{}
		}
		return JSON(w, struct {
			Requeued []string `json:"requeued"`
		}{ids})
	}
	for _, id := range ids {
		fmt.Fprintf(w, "requeued %s\n", id)
	}
	return nil
}

// Pushed prints how many items `queue push` pushed, as text or JSON.
func Pushed(w io.Writer, n int, jsonOut bool) error {
	if jsonOut {
		return JSON(w, struct {
			Pushed int `json:"pushed"`
		}{n})
	}
	_, err := fmt.Fprintf(w, "pushed %d\n", n)
	return err
}
