package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/seed-992972ee/percolator/internal/loopback"
)

// EmbedOptions configures StartEmbedded.
type EmbedOptions struct {
	// Dir holds the member's data. Required.
	Dir string
	// ClientAddr is the host:port clients connect to. Default: a free
	// port on 127.0.0.1.
	ClientAddr string
	// PeerAddr is the host:port of the (unused) peer listener. Default: a
	// free port on 127.0.0.1.
	PeerAddr string
	// LogLevel is etcd's own log level. Default "fatal": the member's
	// failures reach the caller through Err, and stopping it logs errors.
	LogLevel string
}

// Embedded is a single-member etcd cluster running in this process, for
// tests and `percolator devcluster`: a real etcd server, not a model of
// one, but with one member it survives no failure of its own.
type Embedded struct {
	e        *embed.Etcd
	endpoint string
}

// StartEmbedded starts a single etcd member and waits until it serves.
func StartEmbedded(ctx context.Context, opts EmbedOptions) (*Embedded, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("etcd: embedded member needs a directory")
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "fatal"
	}
	// A port picked free is free only until another process binds it
	// (parallel test packages do, all the time): where this function
	// picked the ports, a member that cannot bind one starts again on
	// new ones. Its listeners are bound before its data directory is
	// touched, so the retry starts from nothing.
	picked := opts.ClientAddr == "" && opts.PeerAddr == ""
	for attempt := 1; ; attempt++ {
		m, err := startEmbedded(ctx, opts)
		if err == nil || !picked || attempt == bindAttempts || !addrInUse(err) {
			return m, err
		}
	}
}

// bindAttempts bounds StartEmbedded's starts on ports it picked.
const bindAttempts = 5

// addrInUse reports whether err is a listener's failure to bind a port
// another process holds.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// startEmbedded is one start of StartEmbedded's member, on free ports
// where opts names none.
func startEmbedded(ctx context.Context, opts EmbedOptions) (*Embedded, error) {
	var err error
	if opts.ClientAddr == "" {
		if opts.ClientAddr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	if opts.PeerAddr == "" {
		if opts.PeerAddr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	cfg := embed.NewConfig()
	cfg.Name = "percolator"
	cfg.Dir = opts.Dir
	cfg.LogLevel = opts.LogLevel
	cfg.LogOutputs = []string{"stderr"}
	client := url.URL{Scheme: "http", Host: opts.ClientAddr}
	peer := url.URL{Scheme: "http", Host: opts.PeerAddr}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: start embedded member: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd: embedded member: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd: embedded member not ready after 30s")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	return &Embedded{e: e, endpoint: client.String()}, nil
}

// Endpoints returns the member's client URL, for clientv3.Config.
func (m *Embedded) Endpoints() []string { return []string{m.endpoint} }

// Err delivers the member's fatal errors.
func (m *Embedded) Err() <-chan error { return m.e.Err() }

// Close stops the member.
func (m *Embedded) Close() { m.e.Close() }

// freeAddr returns a 127.0.0.1 port free a moment ago, below the
// kernel's ephemeral ports where it can (loopback.FreeAddr). A variable: a
// test hands out a taken port.
var freeAddr = loopback.FreeAddr
