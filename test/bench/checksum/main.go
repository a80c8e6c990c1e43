// Command checksum is `make bench-checksum`: 50,000 TLS Secrets through the control
// plane's checksum path. It prints the initial checksum's time and memory, then the time
// to the new checksum after one secret changes — the incremental path (parse the one
// certificate, move one ID) against a full recompute (parse all, sort, hash) on the same
// data in the same run. Then the same through a real API server (apiserver.go): 30,000
// Secrets, the first publication, and 100 single changes timed until a watching data
// plane sees the new SecretCheckSum.
package main

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testcerts"
)

var (
	secrets = flag.Int("secrets", 50000, "TLS Secrets.")
	changes = flag.Int("changes", 200, "Single-secret changes to time.")
)

type secret struct {
	name        string
	annotations map[string]string
	data        map[string][]byte // tls.crt and tls.key
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-checksum:", err)
		os.Exit(1)
	}
}

func run() error {
	fmt.Printf("bench-checksum: %d TLS Secrets, %d single-secret changes\n", *secrets, *changes)
	all, err := makeSecrets(*secrets + *changes)
	if err != nil {
		return err
	}
	world, spare := all[:*secrets], all[*secrets:]

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	set := checksum.NewSet()
	for _, s := range world {
		id, err := checksum.SecretID(s.name, s.annotations, checksum.DefaultVersionAnnotation, s.data)
		if err != nil {
			return err
		}
		set.Put(s.name, id)
	}
	initialSum := set.Checksum()
	initial := time.Since(start)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	fmt.Printf("initial checksum: %v, retained memory of the ID set %.1f MiB\n",
		initial.Round(time.Millisecond), float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))

	var incremental, full []time.Duration
	for i := range *changes {
		// Secret i gets a renewed certificate and a new version.
		changed := spare[i]
		changed.name = world[i].name
		changed.annotations = map[string]string{checksum.DefaultVersionAnnotation: fmt.Sprint(2 + i)}
		world[i] = changed

		start := time.Now()
		id, err := checksum.SecretID(changed.name, changed.annotations, checksum.DefaultVersionAnnotation, changed.data)
		if err != nil {
			return err
		}
		set.Put(changed.name, id)
		incSum := set.Checksum()
		incremental = append(incremental, time.Since(start))

		if i < 5 { // a full recompute takes seconds: a few samples are enough
			start = time.Now()
			ids := make([]string, 0, len(world))
			for _, s := range world {
				id, err := checksum.SecretID(s.name, s.annotations, checksum.DefaultVersionAnnotation, s.data)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			fullSum := checksum.Sum(ids)
			full = append(full, time.Since(start))
			if fullSum != incSum {
				return fmt.Errorf("change %d: incremental %s != full %s", i, incSum, fullSum)
			}
		}
	}
	if initialSum == set.Checksum() {
		return fmt.Errorf("the checksum did not change")
	}
	p50i, p99i := percentile(incremental, 0.5), percentile(incremental, 0.99)
	p50f := percentile(full, 0.5)
	fmt.Printf("one secret changed → new checksum: incremental p50 %v, p99 %v (target < 10ms); full recompute p50 %v; speed-up %.0fx (target ≥ 100x)\n",
		p50i.Round(time.Microsecond), p99i.Round(time.Microsecond), p50f.Round(time.Millisecond), float64(p50f)/float64(p50i))
	return apiServerRun()
}

// makeSecrets issues n distinct certificates for one key (issuing, not key generation,
// dominates; the checksum path reads the certificate and checks the pair).
func makeSecrets(n int) ([]secret, error) {
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		return nil, err
	}
	keyPEM := testcerts.KeyPEM(key)
	out := make([]secret, n)
	for i := range out {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 1)), Subject: pkix.Name{CommonName: fmt.Sprintf("site-%d.example.com", i)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			return nil, err
		}
		out[i] = secret{
			name:        fmt.Sprintf("site-example-com-%d", i),
			annotations: map[string]string{checksum.DefaultVersionAnnotation: "1"},
			data: map[string][]byte{
				checksum.KeyTLSCrt: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
				checksum.KeyTLSKey: keyPEM,
			},
		}
	}
	return out, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1)+0.5)]
}
