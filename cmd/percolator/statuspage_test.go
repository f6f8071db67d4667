package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// httpGet gets url with the headers given as name, value pairs, and
// returns the status and body.
func httpGet(t *testing.T, client *http.Client, url string, header ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// waitPage gets url until its body holds every want, and fails the test
// if the deadline of 30s passes first.
func waitPage(t *testing.T, url string, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := ""
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		missing := false
		for _, w := range want {
			missing = missing || !strings.Contains(body, w)
		}
		if !missing {
			return body
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never showed %q; last:\n%s", url, want, body)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestServeHTTPFlag: --http serves the status page at / and the metrics
// at /metrics, as does its old name --metrics; beyond loopback it is
// refused without a token, or without TLS unless --insecure, naming the
// flags.
func TestServeHTTPFlag(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--http", "0.0.0.0:0"}, []string{"--http 0.0.0.0:0", "--token-file"}},
		{[]string{"serve", "--http", "0.0.0.0:0", "--token-file", tokenFile}, []string{"--http 0.0.0.0:0", "--tls-cert", "--insecure"}},
		{[]string{"serve", "--http", "127.0.0.1:1", "--metrics", "127.0.0.1:2"}, []string{"--metrics", "--http"}},
		{[]string{"worker", "--server", "127.0.0.1:1", "--http", "0.0.0.0:0"}, []string{"--http 0.0.0.0:0", "loopback"}},
	} {
		args := tc.args
		if args[0] == "serve" {
			args = append(args, "--dir", t.TempDir(), "--listen", "127.0.0.1:0")
		}
		_, errOut, code := runCLI(t, args...)
		if code != 2 {
			t.Errorf("percolator %q: exit %d, want 2\n%s", args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("percolator %q: %q does not say %q", args, errOut, w)
			}
		}
	}

	httpAddr := freeAddr(t)
	_, _, stop := serveInProcess(t, "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics", httpAddr)
	if code, body := httpGet(t, http.DefaultClient, "http://"+httpAddr+"/metrics"); code != http.StatusOK || !strings.Contains(body, "percolator_sessions") {
		t.Fatalf("--metrics: GET /metrics: %d\n%s", code, body)
	}
	if code, body := httpGet(t, http.DefaultClient, "http://"+httpAddr+"/"); code != http.StatusOK || !strings.Contains(body, "percolator serve") {
		t.Fatalf("--metrics: GET /: %d\n%s", code, body)
	}

	// A worker's page shows the observers it reads from the server.
	srvAddr, _, _ := serveInProcess(t, "--dir", t.TempDir(), "--listen", "127.0.0.1:0")
	workerHTTP := freeAddr(t)
	wctx, wcancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() {
		var out, errOut bytes.Buffer
		exit <- run(wctx, []string{"worker", "--server", srvAddr, "--scanners", "1", "--http", workerHTTP}, strings.NewReader(""), &out, &errOut)
	}()
	waitPage(t, "http://"+workerHTTP+"/", "percolator worker", `<tr data-observer="document">`, "This process is not a server")
	if code, body := httpGet(t, http.DefaultClient, "http://"+workerHTTP+"/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("worker: GET /metrics: %d\n%s", code, body)
	}
	wcancel()
	if code := <-exit; code != 0 {
		t.Errorf("worker with its status page: exit %d at the signal, want 0", code)
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve with its status page: exit %d at the signal, want 0", code)
	}
}

// loopbackName is a host name that resolves to loopback addresses only:
// an address by that name is beyond loopback to serve's check (only
// localhost and loopback IPs are taken as loopback), yet a server
// listening on it binds loopback.
func loopbackName(t *testing.T) string {
	t.Helper()
	for _, name := range []string{hostname(), "ip6-localhost", "localhost.localdomain"} {
		if name == "" || name == "localhost" {
			continue
		}
		addrs, err := net.LookupHost(name)
		if err != nil || len(addrs) == 0 {
			continue
		}
		all := true
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
				all = false
			}
		}
		if all {
			return name
		}
	}
	t.Skip("no host name here resolves to loopback only: serving beyond loopback would bind a public address")
	return ""
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// TestServeHTTPNeedsToken: --http beyond loopback serves TLS with
// serve's certificate, and answers 401 to a request without the token,
// on the page and on /metrics alike.
func TestServeHTTPNeedsToken(t *testing.T) {
	name := loopbackName(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := testCert(t)
	_, port, _ := net.SplitHostPort(freeAddr(t))
	serveInProcess(t, "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--token-file", tokenFile,
		"--tls-cert", cert, "--tls-key", key, "--http", net.JoinHostPort(name, port))
	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "https://" + net.JoinHostPort("127.0.0.1", port)
	for _, path := range []string{"/", "/metrics"} {
		if code, body := httpGet(t, client, base+path); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d\n%s", path, code, body)
		}
		if code, _ := httpGet(t, client, base+path, "Authorization", "Bearer s3cret"); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d", path, code)
		}
	}
	if code, _ := httpGet(t, client, base+"/?token=s3cret"); code != http.StatusSeeOther {
		t.Errorf("GET /?token=: %d, want a redirect setting the cookie", code)
	}
}

// chromium is the Chromium to drive: $PERCOLATOR_CHROMIUM, else
// /usr/bin/chromium, else chromium or chromium-browser on PATH; "" when
// none is installed.
func chromium() string {
	if p := os.Getenv("PERCOLATOR_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// pageState is what the browser test reads off the page's DOM.
type pageState struct {
	Observers int    `json:"observers"` // rows of the observers table
	Ran       bool   `json:"ran"`       // some observer has runs
	Sessions  int    `json:"sessions"`
	Leader    string `json:"leader"`
	Store     string `json:"store"`
	Charts    int    `json:"charts"` // charts drawn with a line
	Lag       bool   `json:"lag"`
}

func (s pageState) ok() bool {
	return s.Observers > 0 && s.Ran && s.Sessions >= 1 && strings.Contains(s.Leader, "This server") && s.Store != "" && s.Charts > 0 && s.Lag
}

const readPage = `(() => {
	const text = sel => { const e = document.querySelector(sel); return e ? e.textContent.trim() : ""; };
	const runs = [...document.querySelectorAll('#observers tr[data-observer] td.runs')].map(e => parseInt(e.textContent, 10));
	return {
		observers: runs.length,
		ran: runs.some(n => n > 0),
		sessions: parseInt(text('#sessions'), 10) || 0,
		leader: text('#leader'),
		store: text('#store-size'),
		charts: document.querySelectorAll('#charts svg.chart polyline').length,
		lag: document.querySelector('#lag') !== null,
	};
})()`

// TestStatusPageInBrowser: headless Chromium loads the status page of a
// running serve while an index job runs against it, and finds the
// observers with runs, the sessions (at least the page's own client: the
// index may have ended),
// the oracle, the store's size and charts drawn. It writes a screenshot.
// Skipped only when no Chromium is installed.
func TestStatusPageInBrowser(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("no Chromium installed (apt-get install chromium, or set PERCOLATOR_CHROMIUM): the status page's browser test needs one")
	}
	dir, addr, httpAddr := t.TempDir(), freeAddr(t), freeAddr(t)
	serveProc(t, dir, addr, "--http", httpAddr)
	idx := command("index", "--server", addr, "--quiet", "--scanners", "2", bigCorpus(t, 60))
	var idxOut lockedBuffer
	idx.Stdout, idx.Stderr = &idxOut, &idxOut
	if err := idx.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killProc(idx) })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // a ceiling for a loaded machine: the page shows the runs in seconds
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(exe), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1200, 1400))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	url := "http://" + httpAddr + "/"
	var st pageState
	for {
		// Each attempt loads the page afresh (the page also refreshes
		// itself; an attempt it cut short is tried again).
		err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("#charts")))
		if err == nil {
			st, err = chromedp.Run(bctx, chromedp.Evaluate[pageState](readPage))
		}
		if err == nil && st.ok() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the page never showed the running index (last read %+v, err %v)\nindex:\n%s", st, err, idxOut.String())
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("reading the page: %v (tried again)", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "statuspage.png")
	if err := os.WriteFile(shot, png, 0o600); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the screenshot is not a PNG")
	}
	b, _ := json.Marshal(st)
	t.Logf("the page showed %s; screenshot: %s", b, shot)
}
