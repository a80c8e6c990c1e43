package podcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type liveLeaf struct {
	cert *x509.Certificate
	ca   string
}

// TestRotationKeepsEveryLiveLeafVerifiable walks three days on a fake clock in five-minute
// steps, issuing leaves of random lifetimes, rotating on a schedule, taking in one supplied
// CA, and "restarting" (a round trip through the Secret form) at every step. At every step
// every live leaf verifies against the published bundle, every CA was published at least
// the overlap before it signed, and a retired CA leaves the bundle once its leaves expired.
//
// Canaried (an observation time), each next CA waits in the preview bundle until its
// canaries have been observed, and the overlap counts from its entry into the live bundle.
func TestRotationKeepsEveryLiveLeafVerifiable(t *testing.T) {
	for _, observation := range []time.Duration{0, 90 * time.Minute} {
		t.Run(fmt.Sprintf("observation %v", observation), func(t *testing.T) { walkRotation(t, observation) })
	}
}

func walkRotation(t *testing.T, observation time.Duration) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	p := RotationPolicy{Every: 6 * time.Hour, Overlap: 2 * time.Hour, MaxLifetime: 3 * time.Hour, Observation: observation}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	generate := func(now time.Time) (*CAEntry, error) { return NewCA("test CA", now, 30*24*time.Hour) }
	first, err := generate(clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	rot := &Rotation{Current: first, SigningSince: clk.Now()}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rng := mrand.New(mrand.NewPCG(1, 2))

	published := map[string]time.Time{} // fingerprint → first time in the bundle
	var leaves []liveLeaf
	signers := map[string]bool{}
	supplied := false
	for step := 0; step < 3*24*12; step++ {
		now := clk.Now()
		if step >= 400 && !supplied { // an operator supplies a CA through next.crt/next.key (once none waits)
			ca, err := NewCA("supplied CA", now, 30*24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			data, ann := rot.ToSecret()
			if rot.Next == nil {
				data[NextCertKey], data[NextKeyKey] = ca.CertPEM, ca.KeyPEM
				delete(ann, AnnotationNextSignsAt)
				supplied = true
			}
			if rot, err = RotationFromSecret(data, ann, now); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rot.Advance(now, p, generate); err != nil {
			t.Fatal(err)
		}
		// The canaries, always selected and always passing, as the signer judges them.
		rot.Observe(now, true)
		if ends := rot.ObservationEnds(p); !ends.IsZero() && !now.Before(ends) {
			rot.GoLive(now, p)
		}
		// A restart: the rotation survives only through its Secret form.
		data, ann := rot.ToSecret()
		if rot, err = RotationFromSecret(data, ann, now); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		bundle := rot.Bundle()
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(bundle)) {
			t.Fatal("empty bundle")
		}
		for _, e := range []*CAEntry{rot.Current, rot.Next} {
			if e != nil && strings.Contains(bundle, string(e.CertPEM)) { // live, not only previewed
				if _, ok := published[e.Fingerprint()]; !ok {
					published[e.Fingerprint()] = now
				}
			}
		}
		if n := strings.Count(bundle, "BEGIN CERTIFICATE"); n > 3 {
			t.Fatalf("step %d: %d CAs published", step, n)
		}

		// Issue a leaf with the current CA, reserving first as the signer does.
		if step%2 == 0 {
			fp := rot.Current.Fingerprint()
			if !signers[fp] {
				signers[fp] = true
				if since := now.Sub(published[fp]); step > 0 && since < p.Overlap {
					t.Fatalf("step %d: CA signs %v after it was published, overlap is %v", step, since, p.Overlap)
				}
			}
			lifetime := time.Hour + time.Duration(rng.Int64N(int64(p.MaxLifetime-time.Hour)))
			notBefore := now.Add(-time.Minute)
			notAfter := notBefore.Add(lifetime)
			rot.Reserve(now, notAfter, p)
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(step) + 1), NotBefore: notBefore, NotAfter: notAfter,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, rot.Current.Cert, leafKey.Public(), rot.Current.Key)
			if err != nil {
				t.Fatal(err)
			}
			leaf, _ := x509.ParseCertificate(der)
			leaves = append(leaves, liveLeaf{leaf, fp})
		}

		live := leaves[:0]
		for _, l := range leaves {
			if now.After(l.cert.NotAfter) {
				continue
			}
			live = append(live, l)
			if _, err := l.cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Fatalf("step %d (%v): a live leaf of CA %s does not verify against the bundle: %v", step, now.Sub(start), l.ca[:8], err)
			}
		}
		leaves = live
		// A retired CA without live leaves is gone within ReserveAhead plus one step.
		for _, e := range rot.Previous {
			hasLive := false
			for _, l := range leaves {
				hasLive = hasLive || l.ca == e.Fingerprint()
			}
			if !hasLive && now.Sub(lastNotAfter(leaves, e)) > p.MaxLifetime+ReserveAhead+5*time.Minute {
				t.Fatalf("step %d: retired CA %s stays published without live leaves", step, e.Fingerprint()[:8])
			}
		}
		clk.Step(5 * time.Minute)
	}
	if len(signers) < 10 || !supplied {
		t.Fatalf("only %d CAs signed (supplied: %v)", len(signers), supplied)
	}
}

func lastNotAfter(leaves []liveLeaf, e *CAEntry) time.Time {
	var last time.Time
	for _, l := range leaves {
		if l.ca == e.Fingerprint() && l.cert.NotAfter.After(last) {
			last = l.cert.NotAfter
		}
	}
	if last.IsZero() {
		return e.Reserved.Add(-(ReserveAhead)) // no tracked leaf left: bound by the reservation
	}
	return last
}

func TestRotationBadInput(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA("ca", now, time.Hour*100)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewCA("other", now, time.Hour*100)
	for name, data := range map[string]map[string][]byte{
		"garbage":        {CACertKey: []byte("garbage"), CAKeyKey: []byte("garbage")},
		"no key":         {CACertKey: ca.CertPEM},
		"key mismatch":   {CACertKey: ca.CertPEM, CAKeyKey: other.KeyPEM},
		"not a CA":       {CACertKey: []byte(strings.ReplaceAll(string(ca.KeyPEM), "PRIVATE KEY", "CERTIFICATE")), CAKeyKey: ca.KeyPEM},
		"bad previous":   {CACertKey: ca.CertPEM, CAKeyKey: ca.KeyPEM, PreviousCertKey: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")},
		"bad annotation": nil,
	} {
		ann := map[string]string{}
		if data == nil {
			data = map[string][]byte{CACertKey: ca.CertPEM, CAKeyKey: ca.KeyPEM}
			ann[AnnotationReservedUntil] = "{"
		}
		if _, err := RotationFromSecret(data, ann, now); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	// A next CA that does not parse is reported, never signs, never published, and kept.
	rot, err := RotationFromSecret(map[string][]byte{CACertKey: ca.CertPEM, CAKeyKey: ca.KeyPEM, NextCertKey: []byte("x"), NextKeyKey: []byte("y")}, nil, now)
	if err != nil || rot.NextError == nil || rot.Next != nil {
		t.Fatalf("bad next: %v %v", err, rot)
	}
	if _, err := rot.Advance(now.Add(1000*time.Hour), RotationPolicy{Every: time.Hour, Overlap: time.Minute}, func(time.Time) (*CAEntry, error) {
		t.Fatal("generated a CA over a supplied one that does not parse")
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if rot.Current.Fingerprint() != ca.Fingerprint() || strings.Count(rot.Bundle(), "BEGIN") != 1 {
		t.Error("a bad next CA changed the signing CA or the bundle")
	}
	if data, _ := rot.ToSecret(); string(data[NextCertKey]) != "x" {
		t.Error("a bad next CA was removed from the Secret")
	}
	for _, p := range []RotationPolicy{{Every: time.Hour, Overlap: time.Hour}, {Overlap: -1}, {Every: -1}} {
		if err := p.Validate(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// testCA makes a CA certificate from tmpl's times and usages, signed by parent (self-signed
// when nil), and returns it with its key in the Secret's PEM forms.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func makeCA(t *testing.T, cn string, notBefore, notAfter time.Time, isCA bool, usage x509.KeyUsage, parent *testCA) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(mrand.Int64()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: isCA, BasicConstraintsValid: true, KeyUsage: usage}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
}

// TestCAValidatedOnLoad: a CA Secret is used only when its CA can sign (a CA certificate
// with keyCertSign), its key is the certificate's, its chain links, and it is valid now;
// the error names the check that failed. A next CA that fails a check is set aside.
func TestCAValidatedOnLoad(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sign := x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	root := makeCA(t, "root", now.Add(-time.Hour), now.Add(1000*time.Hour), true, sign, nil)
	otherRoot := makeCA(t, "other root", now.Add(-time.Hour), now.Add(1000*time.Hour), true, sign, nil)
	inter := makeCA(t, "intermediate", now.Add(-time.Hour), now.Add(100*time.Hour), true, sign, root)
	good := makeCA(t, "good", now.Add(-time.Hour), now.Add(100*time.Hour), true, sign, nil)
	chain := func(cas ...*testCA) []byte {
		var out []byte
		for _, c := range cas {
			out = append(out, c.certPEM...)
		}
		return out
	}
	for name, tc := range map[string]struct {
		ca   *testCA
		crt  []byte  // default: ca's certificate alone
		key  *testCA // default: ca's key
		want string
	}{
		"not a CA":            {ca: makeCA(t, "leaf", now.Add(-time.Hour), now.Add(time.Hour), false, x509.KeyUsageDigitalSignature, nil), want: "not a CA certificate"},
		"no keyCertSign":      {ca: makeCA(t, "crl only", now.Add(-time.Hour), now.Add(time.Hour), true, x509.KeyUsageCRLSign, nil), want: "keyCertSign"},
		"key mismatch":        {ca: good, key: otherRoot, want: "key does not match"},
		"chain does not link": {ca: inter, crt: chain(inter, otherRoot), want: "not signed by certificate 2"},
		"not valid yet":       {ca: makeCA(t, "future", now.Add(2*CAClockSkew), now.Add(time.Hour), true, sign, nil), want: "not valid before"},
		"expired":             {ca: makeCA(t, "past", now.Add(-2*time.Hour), now.Add(-time.Second), true, sign, nil), want: "expired at"},
	} {
		crt, key := tc.crt, tc.key
		if crt == nil {
			crt = tc.ca.certPEM
		}
		if key == nil {
			key = tc.ca
		}
		_, err := RotationFromSecret(map[string][]byte{CACertKey: crt, CAKeyKey: key.keyPEM}, nil, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}

	// A chain that links is used; the Secret keeps it whole; only the CA is published.
	rot, err := RotationFromSecret(map[string][]byte{CACertKey: chain(inter, root), CAKeyKey: inter.keyPEM}, nil, now)
	if err != nil {
		t.Fatalf("a linked chain: %v", err)
	}
	if data, _ := rot.ToSecret(); string(data[CACertKey]) != string(chain(inter, root)) {
		t.Error("writing the rotation back dropped the chain")
	}
	if strings.Count(rot.Bundle(), "BEGIN") != 1 || rot.Current.Cert.Subject.CommonName != "intermediate" {
		t.Error("the bundle holds more than the signing CA")
	}
	// A CA whose notBefore lies within the skew ahead is used.
	if _, err := RotationFromSecret(map[string][]byte{CACertKey: makeCA(t, "soon", now.Add(CAClockSkew/2), now.Add(time.Hour), true, sign, nil).certPEM}, nil, now); err == nil || !strings.Contains(err.Error(), "key") {
		t.Errorf("a CA within the skew: %v (want only the missing key refused)", err)
	}

	// Next CAs: an expired one is set aside; one not valid yet waits to sign until it is.
	expired := makeCA(t, "next past", now.Add(-2*time.Hour), now.Add(-time.Second), true, sign, nil)
	rot, err = RotationFromSecret(map[string][]byte{CACertKey: good.certPEM, CAKeyKey: good.keyPEM, NextCertKey: expired.certPEM, NextKeyKey: expired.keyPEM}, nil, now)
	if err != nil || rot.Next != nil || rot.NextError == nil || !strings.Contains(rot.NextError.Error(), "expired") {
		t.Errorf("expired next CA: %v, next %v, next error %v", err, rot.Next, rot.NextError)
	}
	noKey, err := RotationFromSecret(map[string][]byte{CACertKey: good.certPEM, CAKeyKey: good.keyPEM, NextCertKey: good.certPEM}, nil, now)
	if err != nil || noKey.NextError == nil || noKey.Current.Cert.Subject.CommonName != "good" {
		t.Errorf("next.crt without next.key: %v, next error %v (the current CA signs on, the next one is set aside)", err, noKey.NextError)
	}
	future := makeCA(t, "next future", now.Add(3*time.Hour), now.Add(100*time.Hour), true, sign, nil)
	rot, err = RotationFromSecret(map[string][]byte{CACertKey: good.certPEM, CAKeyKey: good.keyPEM, NextCertKey: future.certPEM, NextKeyKey: future.keyPEM},
		map[string]string{AnnotationNextSignsAt: now.Add(time.Hour).Format(time.RFC3339)}, now)
	if err != nil || rot.Next == nil {
		t.Fatalf("next CA not valid yet: %v", err)
	}
	p := RotationPolicy{Overlap: time.Hour, MaxLifetime: time.Hour}
	if at := rot.NextChange(p); !at.Equal(future.cert.NotBefore.Add(-CAClockSkew)) {
		t.Errorf("next change at %v, want when the next CA becomes valid", at)
	}
	if _, err := rot.Advance(now.Add(2*time.Hour), p, nil); err != nil || rot.Current.Cert.Subject.CommonName != "good" {
		t.Errorf("a next CA not valid yet signs (%v)", err)
	}
	if _, err := rot.Advance(future.cert.NotBefore, p, nil); err != nil || rot.Current.Cert.Subject.CommonName != "next future" {
		t.Errorf("the next CA does not sign once valid (%v)", err)
	}
}
