package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// The bare ceiling: the least a Redfish GET can cost in Go on this machine. A net/http server
// that checks Basic credentials in constant time and writes a fixed JSON body (a real
// ComputerSystem response, so of the same size). It runs as its own process, like the server,
// so that its CPU and RSS are read the same way. Every figure of the server is reported as a
// ratio to this one, measured in the same run: absolute numbers drift on a shared machine,
// ratios measured together hold.

// runCeiling is `krf-bench ceiling -listen ADDR -body FILE -user U -password P`.
func runCeiling(args []string) error {
	fs := flag.NewFlagSet("ceiling", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	bodyFile := fs.String("body", "", "file with the JSON body to serve")
	user := fs.String("user", "admin", "Basic auth user")
	pass := fs.String("password", "", "Basic auth password")
	_ = fs.Parse(args)
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		return err
	}
	wantUser, wantPass := []byte(*user), []byte(*pass)
	length := strconv.Itoa(len(body))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		// Both comparisons always run: the time does not tell which one failed.
		okUser := subtle.ConstantTimeCompare([]byte(u), wantUser)
		okPass := subtle.ConstantTimeCompare([]byte(p), wantPass)
		if !ok || okUser&okPass != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="ceiling"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Content-Length", length)
		_, _ = w.Write(body)
	})
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	// The harness reads the address from the first line of stdout.
	fmt.Println(l.Addr().String())
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	return srv.Serve(l)
}
