package statuspage

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// CookieName is the cookie Protect sets after a ?token= request.
const CookieName = "percolator_token"

// Protect requires token on every request to h, given one of three ways:
//
//  1. an "Authorization: Bearer TOKEN" header (Prometheus, curl);
//  2. a "?token=TOKEN" query (a browser's first visit): Protect answers it
//     by setting the token in a cookie and redirecting to the same URL
//     without the query, so the token leaves the address bar and the
//     history, and the page's refreshes carry the cookie;
//  3. that cookie (HttpOnly, SameSite=Strict, Secure when served over
//     TLS).
//
// Anything else gets 401. An empty token protects nothing: h is returned.
func Protect(h http.Handler, token string) http.Handler {
	if token == "" {
		return h
	}
	want := []byte(token)
	ok := func(got string) bool { return subtle.ConstantTimeCompare([]byte(got), want) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Has("token") {
			if !ok(q.Get("token")) {
				unauthorized(w)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(bearer) {
			h.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(CookieName); err == nil && ok(c.Value) {
			h.ServeHTTP(w, r)
			return
		}
		unauthorized(w)
	})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="percolator"`)
	http.Error(w, "401 unauthorized: give the token as \"Authorization: Bearer TOKEN\", or open /?token=TOKEN once in a browser", http.StatusUnauthorized)
}
