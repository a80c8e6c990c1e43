package jwks

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// kidsOf lists the kids of a JWK Set document, in order.
func kidsOf(t *testing.T, doc string) []string {
	t.Helper()
	keys, err := jwkset.Unmarshal([]byte(doc))
	if err != nil {
		t.Fatalf("document %q: %v", doc, err)
	}
	kids := make([]string, 0, len(keys))
	for _, k := range keys {
		kids = append(kids, k.KeyID)
	}
	return kids
}

// watchServed asks the server for the set every few milliseconds until stop is called,
// and counts answers of 200 that lack one of want (503 while the set is put back is fine).
func watchServed(t *testing.T, url string, want func() []string) (stop func() (requests, incomplete int64)) {
	t.Helper()
	var n, bad atomic.Int64
	stopSampling := sample(5*time.Millisecond, func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		n.Add(1)
		if resp.StatusCode != 200 {
			return
		}
		var set struct {
			Keys []struct {
				Kid string `json:"kid"`
			} `json:"keys"`
		}
		if json.NewDecoder(resp.Body).Decode(&set) != nil {
			bad.Add(1)
			return
		}
		served := map[string]bool{}
		for _, k := range set.Keys {
			served[k.Kid] = true
		}
		for _, kid := range want() {
			if !served[kid] {
				bad.Add(1)
				return
			}
		}
	})
	return func() (int64, int64) {
		stopSampling()
		return n.Load(), bad.Load()
	}
}

// TestDriftNeverDropsAKey: with a retired key inside its TTL, the ConfigMap is emptied,
// edited (the retired key taken out), and replaced (another key instead), each inside
// and outside the update interval. Each time the whole set is put back at once, the
// served set never lacks the current or the retired key, and status.keys and the
// published set agree.
func TestDriftNeverDropsAKey(t *testing.T) {
	const interval = 3 * time.Second
	mgr := startManager(t, func(o *Options) { o.MinUpdateInterval = interval })
	ns := newNamespace(t)
	first, second := newChain(t, testcerts.P256), newChain(t, testcerts.P256)
	putSecret(t, ns, "tls", tlsData(first))
	newJWKSConfig(t, ns, "kept", "tls", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Nginx.Enabled = ptrTo(false) })
	waitReady(t, ns, "kept", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	putSecret(t, ns, "tls", tlsData(second))
	oldKid, _ := expectedDoc(t, first)
	newKid, _ := expectedDoc(t, second)
	both := []string{newKid, oldKid}
	testenv.Eventually(t, "the rotation to be published", 30*time.Second, func() bool {
		return slices.Equal(kidsOf(t, getConfigMap(t, ns, "kept-jwks").Data[jwkset.DocumentKey]), both)
	})
	rotated := time.Now()
	published := getConfigMap(t, ns, "kept-jwks").Data[jwkset.DocumentKey]
	stop := watchServed(t, "http://"+mgr.serverAddr+"/"+ns+"/kept/jwks.json", func() []string { return both })

	rogueKid, rogueDoc := expectedDoc(t, newChain(t, testcerts.P256))
	_, onlyNew := expectedDoc(t, second)
	edits := []struct {
		name string
		edit func(cm *corev1.ConfigMap)
	}{
		{"emptied", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{} }},
		{"the retired key edited out", func(cm *corev1.ConfigMap) { cm.Data[jwkset.DocumentKey] = string(onlyNew) }},
		{"the document replaced", func(cm *corev1.ConfigMap) { cm.Data[jwkset.DocumentKey] = string(rogueDoc) }},
	}
	for _, when := range []string{"inside the update interval", "outside the update interval"} {
		if when == "outside the update interval" {
			time.Sleep(time.Until(rotated.Add(interval + time.Second)))
		}
		for _, e := range edits {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept-jwks"}}
			editAs(t, cm, func() { e.edit(cm) })
			testenv.Eventually(t, "the set to be put back after "+e.name+" "+when, 5*time.Second, func() bool {
				return getConfigMap(t, ns, "kept-jwks").Data[jwkset.DocumentKey] == published
			})
			cfg := getConfig(t, ns, "kept")
			var statusKids []string
			for _, k := range cfg.Status.Keys {
				statusKids = append(statusKids, k.KeyID)
			}
			if !slices.Equal(statusKids, both) || cfg.Status.LastKeyID != newKid {
				t.Errorf("%s %s: status.keys %v, published %v", e.name, when, statusKids, both)
			}
			if c := readyCondition(cfg); c.Status != metav1.ConditionTrue {
				t.Errorf("%s %s: Ready %s %s", e.name, when, c.Status, c.Reason)
			}
		}
	}
	requests, incomplete := stop()
	if requests == 0 || incomplete > 0 {
		t.Errorf("%d of %d answers of the server lacked a published key", incomplete, requests)
	}
	if strings.Contains(getConfigMap(t, ns, "kept-jwks").Data[jwkset.DocumentKey], rogueKid) {
		t.Error("the key of the replaced document was published")
	}
	if len(eventsFor(t, ns, "kept", "DriftReverted")) == 0 {
		t.Error("no DriftReverted event")
	}
}

// TestReadyDuringARotationInTheUpdateInterval: a rotation that waits for the end of the
// update interval leaves Ready=True (the previous set is still served), with
// Reconciling=True saying what is pending.
func TestReadyDuringARotationInTheUpdateInterval(t *testing.T) {
	startManager(t, func(o *Options) { o.MinUpdateInterval = time.Hour })
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "busy", "tls", func(c *jwksv1alpha1.JWKSConfig) { c.Spec.Nginx.Enabled = ptrTo(false) })
	waitReady(t, ns, "busy", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256))) // the first change: published at once
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256))) // inside the interval: waits
	testenv.Eventually(t, "Reconciling=True UpdateThrottled", 30*time.Second, func() bool {
		cfg := getConfig(t, ns, "busy")
		for _, c := range cfg.Status.Conditions {
			if c.Type == "Reconciling" && c.Status == metav1.ConditionTrue && c.Reason == jwksv1alpha1.ReasonUpdateThrottled {
				return true
			}
		}
		return false
	})
	if c := readyCondition(getConfig(t, ns, "busy")); c.Status != metav1.ConditionTrue || c.Reason != jwksv1alpha1.ReasonPublished {
		t.Errorf("Ready %s %s while the previous set is served", c.Status, c.Reason)
	}
}
