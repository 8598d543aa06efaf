package tlsconfig

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writePair writes a fresh self-signed certificate and its key as PEM files (through a rename,
// as a Secret volume update would) and returns the certificate's serial number.
func writePair(t *testing.T, dir string, names ...string) string {
	t.Helper()
	c, err := selfSigned(names, time.Now())
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	require.NoError(t, err)
	write := func(name string, block *pem.Block) {
		tmp := filepath.Join(dir, name+".tmp")
		require.NoError(t, os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, name)))
	}
	write("tls.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	write("tls.crt", &pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
	return c.Leaf.SerialNumber.String()
}

// served returns the serial number of the certificate a new TLS handshake presents.
func served(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestReloadServesTheNewCertificate(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, "first.example")
	src, err := Load(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go src.Watch(ctx, 20*time.Millisecond)

	addr := serve(t, src)
	require.Equal(t, first, served(t, addr))

	// An open connection keeps its certificate; new handshakes see the new one.
	open, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	require.NoError(t, err)
	defer open.Close()
	second := writePair(t, dir, "second.example")
	require.NotEqual(t, first, second)
	require.Eventually(t, func() bool { return served(t, addr) == second }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, first, open.ConnectionState().PeerCertificates[0].SerialNumber.String())
	assert.Contains(t, src.Certificate().Leaf.DNSNames, "second.example")

	// A half-written update (new certificate, old key) is not served; the last good pair stays.
	keep, err := os.ReadFile(filepath.Join(dir, "tls.key"))
	require.NoError(t, err)
	writePair(t, dir, "third.example")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), keep, 0o600))
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, second, served(t, addr))
	// Once the key arrives, the new pair is served.
	third := writePair(t, dir, "third.example")
	require.Eventually(t, func() bool { return served(t, addr) == third }, 5*time.Second, 10*time.Millisecond)
}

// serve runs an HTTPS server with ServerConfig(src), as the binary does, and returns its
// address.
func serve(t *testing.T, src *Source) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		TLSConfig: ServerConfig(src), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.key"), nil)
	assert.ErrorContains(t, err, "certFile")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.crt"), []byte("not pem"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.key"), []byte("not pem"), 0o600))
	_, err = Load(filepath.Join(dir, "bad.crt"), filepath.Join(dir, "bad.key"), nil)
	assert.Error(t, err)
}

func TestSelfSigned(t *testing.T) {
	src, err := SelfSigned([]string{"bmc.example.com", "192.0.2.7"})
	require.NoError(t, err)
	leaf := src.Certificate().Leaf
	assert.Equal(t, 3, leaf.Version, "X.509 v3")
	assert.Contains(t, leaf.DNSNames, "localhost")
	assert.Contains(t, leaf.DNSNames, "bmc.example.com")
	assert.True(t, leaf.IPAddresses[len(leaf.IPAddresses)-1].Equal([]byte{192, 0, 2, 7}) ||
		leaf.IPAddresses[len(leaf.IPAddresses)-1].String() == "192.0.2.7")
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, leaf.ExtKeyUsage)
	assert.False(t, leaf.IsCA)
	assert.WithinDuration(t, time.Now().Add(365*24*time.Hour), leaf.NotAfter, time.Hour)
	assert.False(t, src.Reloadable())

	// A client that trusts the PEM verifies the server under its names.
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(src.PEM()))
	conn, err := tls.Dial("tcp", serve(t, src), &tls.Config{RootCAs: pool, ServerName: "bmc.example.com"})
	require.NoError(t, err)
	conn.Close()
}

func TestProtocolFloorAndCiphers(t *testing.T) {
	src, err := SelfSigned(nil)
	require.NoError(t, err)
	addr := serve(t, src)
	dial := func(c *tls.Config) (*tls.Conn, error) {
		c.InsecureSkipVerify = true
		return tls.Dial("tcp", addr, c)
	}

	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		_, err := dial(&tls.Config{MinVersion: v, MaxVersion: v})
		assert.Error(t, err, "TLS version %x must be refused", v)
	}
	// TLS 1.2 without forward secrecy or with CBC is refused.
	for _, cs := range []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA} {
		_, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{cs}})
		assert.Error(t, err, "cipher %s must be refused", tls.CipherSuiteName(cs))
	}
	conn, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12})
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS12), conn.ConnectionState().Version)
	conn.Close()
	conn, err = dial(&tls.Config{})
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS13), conn.ConnectionState().Version)
	conn.Close()
}
