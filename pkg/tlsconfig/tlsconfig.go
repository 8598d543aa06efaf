// Package tlsconfig serves TLS for kubevirt-redfish: a certificate and key loaded from files
// and reloaded when their content changes (a renewed cert-manager or service-ca Secret is
// picked up without a restart), or a self-signed certificate generated at start. The server
// configuration allows TLS 1.2 and 1.3 only, with AEAD ciphers and forward secrecy.
package tlsconfig

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Source holds the current serving certificate.
type Source struct {
	certFile, keyFile string
	log               *zap.Logger

	mu     sync.RWMutex
	cert   *tls.Certificate
	digest [32]byte
}

// Load reads a PEM certificate (chain) and key.
func Load(certFile, keyFile string, log *zap.Logger) (*Source, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Source{certFile: certFile, keyFile: keyFile, log: log}
	if _, err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// SelfSigned generates an ECDSA P-256 certificate valid for a year for localhost, the host
// name, the loopback addresses and names (DNS names or IP addresses).
func SelfSigned(names []string) (*Source, error) {
	cert, err := selfSigned(names, time.Now())
	if err != nil {
		return nil, err
	}
	return &Source{cert: cert, log: zap.NewNop()}, nil
}

// Reloadable reports whether the certificate comes from files.
func (s *Source) Reloadable() bool { return s.certFile != "" }

// Certificate returns the current certificate.
func (s *Source) Certificate() *tls.Certificate {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cert
}

// GetCertificate is tls.Config.GetCertificate: every handshake gets the current certificate.
func (s *Source) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.Certificate(), nil
}

// Watch re-reads the files every interval until ctx ends and switches to their new content
// when it forms a valid pair. A broken pair (say, the certificate written before the key) is
// logged and the current certificate kept.
func (s *Source) Watch(ctx context.Context, interval time.Duration) {
	if !s.Reloadable() {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := s.reload()
		switch {
		case err != nil && !failing:
			s.log.Warn("the TLS certificate files changed but cannot be used; still serving the previous certificate", zap.Error(err))
			failing = true
		case err == nil && changed:
			failing = false
			s.log.Info("TLS certificate reloaded", zap.String("subject", s.subject()), zap.Time("notAfter", s.notAfter()))
		case err == nil:
			failing = false
		}
	}
}

// reload loads the files when their content differs from what is served.
func (s *Source) reload() (bool, error) {
	certPEM, err := os.ReadFile(s.certFile)
	if err != nil {
		return false, fmt.Errorf("tls certFile: %w", err)
	}
	keyPEM, err := os.ReadFile(s.keyFile)
	if err != nil {
		return false, fmt.Errorf("tls keyFile: %w", err)
	}
	digest := sha256.Sum256(append(append(append([]byte{}, certPEM...), 0), keyPEM...))
	s.mu.RLock()
	same := s.cert != nil && bytes.Equal(digest[:], s.digest[:])
	s.mu.RUnlock()
	if same {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("tls certFile/keyFile: %w", err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return false, fmt.Errorf("tls certFile: %w", err)
		}
	}
	s.mu.Lock()
	s.cert, s.digest = &cert, digest
	s.mu.Unlock()
	return true, nil
}

func (s *Source) subject() string {
	if c := s.Certificate(); c != nil && c.Leaf != nil {
		return c.Leaf.Subject.String()
	}
	return ""
}

func (s *Source) notAfter() time.Time {
	if c := s.Certificate(); c != nil && c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

// ServerConfig is the TLS configuration of the Redfish listener: TLS 1.2 or later; for TLS 1.2
// only ECDHE key exchange with AES-GCM or ChaCha20-Poly1305 (TLS 1.3 suites are fixed by Go
// and all modern).
func ServerConfig(s *Source) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: s.GetCertificate,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		CurvePreferences: []tls.CurveID{tls.X25519MLKEM768, tls.X25519, tls.CurveP256, tls.CurveP384},
		NextProtos:       []string{"h2", "http/1.1"},
	}
}

func selfSigned(names []string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kubevirt-redfish (self-signed)", Organization: []string{"kubevirt-redfish"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if n != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// PEM returns the certificate chain in PEM form (for clients that must trust a self-signed
// certificate, such as tests).
func (s *Source) PEM() []byte {
	c := s.Certificate()
	if c == nil {
		return nil
	}
	var b bytes.Buffer
	for _, der := range c.Certificate {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	return b.Bytes()
}
