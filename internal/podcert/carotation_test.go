package podcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
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
func TestRotationKeepsEveryLiveLeafVerifiable(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	p := RotationPolicy{Every: 6 * time.Hour, Overlap: 2 * time.Hour, MaxLifetime: 3 * time.Hour}
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
		if step == 400 && !supplied { // an operator supplies a CA through next.crt/next.key
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
			if rot, err = RotationFromSecret(data, ann); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rot.Advance(now, p, generate); err != nil {
			t.Fatal(err)
		}
		// A restart: the rotation survives only through its Secret form.
		data, ann := rot.ToSecret()
		if rot, err = RotationFromSecret(data, ann); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		bundle := rot.Bundle()
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(bundle)) {
			t.Fatal("empty bundle")
		}
		for _, e := range []*CAEntry{rot.Current, rot.Next} {
			if e != nil {
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
		if _, err := RotationFromSecret(data, ann); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	// A next CA that does not parse is reported, never signs, never published, and kept.
	rot, err := RotationFromSecret(map[string][]byte{CACertKey: ca.CertPEM, CAKeyKey: ca.KeyPEM, NextCertKey: []byte("x"), NextKeyKey: []byte("y")}, nil)
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
