// Package admission checks that no custom resource a tenant can store can break the
// informers that read it: whatever the real API server accepts for any spec field must
// decode into trustplane's Go types, and what Go cannot decode must be refused at
// admission with a message naming the field.
//
// The worst-case values are not picked field by field: the test walks every CRD's schema
// and submits, for every field, adversarial values of every JSON type (server-side dry
// run), so a field added tomorrow is covered too.
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/config"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

const namespace = "default"

// baselines are valid specs with every field set, so every path of the schema exists and
// one field at a time can be made hostile while the rest stays valid.
var baselines = map[string]map[string]any{
	"JWKSConfig": {
		"certificateSecret": "issuer-tls", "configMapName": "issuer-set", "nginxConfigMapName": "issuer-conf",
		"endpoint": "/jwks.json", "updateStrategy": "rolling", "keepOldKeys": true, "oldKeysTTL": "720h",
		"cleanupOnDelete": false, "algorithm": "ES256", "cacheMaxAge": "5m", "issuer": "https://idp.example",
		"signingSecret": "issuer-signing",
		"promotion": map[string]any{"relyingParties": []any{map[string]any{"name": "apiserver-0", "metricsURL": "https://10.0.0.10:6443/metrics",
			"credentialsSecretName": "apiserver-metrics", "issuer": "https://idp.example", "audience": "sts.example.com"}}},
		"nginx": map[string]any{"enabled": true, "image": "nginx", "replicas": int64(2),
			"resources": map[string]any{"limits": map[string]any{"memory": "64Mi"}, "requests": map[string]any{"cpu": "10m"}}},
	},
	"Cluster": {
		"core":       map[string]any{"purpose": "production", "region": "eu-west-1"},
		"extensions": map[string]any{"list": []any{map[string]any{"type": "shoot-dns-service"}}},
		"oidcConfig": map[string]any{"clientID": "c", "issuerURL": "https://idp.example", "groupsClaim": "groups",
			"usernameClaim": "sub", "usernamePrefix": "-", "signingAlgs": []any{"RS256"}},
		"infrastructure": map[string]any{"provider": "aws", "machineType": "m5.xlarge", "autoScalerMin": int64(1),
			"autoScalerMax": int64(3), "numberOfZones": int64(1), "subscriptionSelector": "shared",
			"networking": map[string]any{"nodes": "10.250.0.0/16", "pods": "100.64.0.0/12", "services": "100.104.0.0/13", "dualStack": true},
			"additionalWorkers": []any{map[string]any{"name": "gpu", "machineType": "g5.xlarge", "autoScalerMin": int64(0), "autoScalerMax": int64(2),
				"zones": []any{"eu-west-1a"}, "volume": map[string]any{"type": "gp3", "size": "100Gi"}, "labels": map[string]any{"example.com/role": "gpu"},
				"taints": []any{map[string]any{"key": "gpu", "value": "present", "effect": "NoSchedule"}}}}},
		"kubernetesVersion": "1.35",
		"kubeAPIServer": map[string]any{"acl": map[string]any{"allowedCIDRs": []any{"203.0.113.0/24"}},
			"serviceAccountConfig": map[string]any{"maxTokenExpiration": "720h"}},
		"registryCache":               []any{map[string]any{"upstream": "docker.io", "volumeSize": "10Gi", "garbageCollection": map[string]any{"ttl": "168h"}}},
		"administrators":              []any{"admin@example.com"},
		"kubeconfigSecretRef":         map[string]any{"name": "target", "key": "kubeconfig"},
		"kubeconfigRequestNamespaces": []any{"team-a"},
	},
	"KubeconfigRequest": {
		"cluster": "c1", "clusterNamespace": "clusters", "expiration": int64(3600),
		"clusterRole": map[string]any{"rules": []any{rule()}},
		"role":        map[string]any{"namespace": "apps", "rules": []any{rule()}},
	},
	"SubscriptionRequest": {"provider": "aws", "subscriptionSelector": "shared", "euAccess": false},
	"PodIdentityPolicy": {"signerName": "trustplane.io/pod-identity", "serviceAccounts": []any{map[string]any{"name": "web",
		"dnsNames": []any{"web.default.svc"}, "extendedKeyUsages": []any{"ServerAuth"}}}},
	"SecretCheckSum":  {"checksum": "d41d8cd98f00b204e9800998ecf8427e", "ids": []any{"1-1-ab"}, "timestamp": "2026-01-02T03:04:05Z"},
	"IngressCheckSum": {"checksum": "d41d8cd98f00b204e9800998ecf8427e", "ids": []any{"1-1"}, "timestamp": "2026-01-02T03:04:05Z"},
}

func rule() map[string]any {
	return map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "resourceNames": []any{"web"},
		"verbs": []any{"get"}, "nonResourceURLs": []any{"/healthz"}}
}

// hostile values per JSON type; each one is tried in every field of that type.
var (
	hostileStrings = []any{"", " ", "a/b", "..", "UPPER", "30d", "1 h", "-5m", "1.5h", "99999999999h", "1e1.5", "1e999999999",
		"0x10", "2024-01-02t03:04:05z", "2024-01-02T03:04:05", "nil", "\u00b5s", strings.Repeat("a", 254), strings.Repeat("9", 70),
		"a\nb", "${x}", "*"}
	hostileIntegers = []any{int64(-1), int64(0), int64(math.MaxInt32) + 1, int64(1) << 40, int64(math.MaxInt64), int64(math.MinInt64), 1.5, 1e30}
	hostileBools    = []any{"true", int64(1)}
	hostileObjects  = []any{map[string]any{}, map[string]any{"unknown": "x"}, "x", []any{}}
	hostileArrays   = []any{[]any{}, make([]any, 300), "x", []any{nil}}
)

// step is one step of a path into a spec: a field, an array index or a map key.
type step struct {
	field, key string
	index      int // with field and key empty
}

type probe struct {
	path  []step
	value any
}

func (p probe) String() string { return pathString(p.path) + "=" + short(p.value) }

func pathString(path []step) string {
	var b strings.Builder
	b.WriteString("spec")
	for _, s := range path {
		switch {
		case s.field != "":
			b.WriteString("." + s.field)
		case s.key != "":
			b.WriteString("[" + s.key + "]")
		default:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	return b.String()
}

// lastName is the last field name or map key of a path: what a refusal must mention.
func lastName(path []step) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].field != "" {
			return path[i].field
		}
		if path[i].key != "" {
			return path[i].key
		}
	}
	return "spec"
}

func short(v any) string {
	raw, _ := json.Marshal(v)
	if len(raw) > 40 {
		return string(raw[:37]) + "..."
	}
	return string(raw)
}

// TestStoredValuesDecode submits every hostile value in every spec field of every served
// version of every CRD. Refused: the message names the field. Accepted: the object the API
// server would store decodes into trustplane's Go type, as an informer decodes it.
func TestStoredValuesDecode(t *testing.T) {
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		kind := crd.Spec.Names.Kind
		base, ok := baselines[kind]
		if !ok {
			t.Errorf("no baseline spec for %s: add one, so its fields are probed", kind)
			continue
		}
		for _, version := range crd.Spec.Versions {
			if !version.Served {
				continue
			}
			t.Run(kind+"/"+version.Name, func(t *testing.T) {
				t.Parallel()
				if _, err := submit(crd, version.Name, base); err != nil {
					t.Fatalf("the baseline is refused: %v", err)
				}
				probes := probesOf(nil, version.Schema.OpenAPIV3Schema.Properties["spec"])
				refused, stored := runProbes(t, crd, version.Name, base, probes)
				t.Logf("%d probes: %d refused at admission, %d stored and decoded", len(probes), refused, stored)
				if refused == 0 || stored == 0 {
					t.Errorf("a walk with %d refused and %d stored probes tests nothing", refused, stored)
				}
			})
		}
	}
}

// probesOf lists the hostile values for the field at path, whose schema is s, and for
// every field below it.
func probesOf(path []step, s apiextensionsv1.JSONSchemaProps) []probe {
	at := func(values ...[]any) []probe {
		var out []probe
		for _, vs := range values {
			for _, v := range vs {
				out = append(out, probe{path: path, value: v})
			}
		}
		return out
	}
	switch {
	case s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
		return at(hostileObjects)
	case s.XIntOrString:
		return at(hostileStrings, hostileIntegers)
	}
	switch s.Type {
	case "string":
		return at(hostileStrings)
	case "integer", "number":
		return at(hostileIntegers)
	case "boolean":
		return at(hostileBools)
	case "array":
		out := at(hostileArrays)
		if s.Items != nil && s.Items.Schema != nil {
			out = append(out, probesOf(append(slicesClone(path), step{index: 0}), *s.Items.Schema)...)
		}
		return out
	case "object":
		out := at(hostileObjects)
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			out = append(out, probesOf(append(slicesClone(path), step{field: name}), s.Properties[name])...)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			out = append(out, probesOf(append(slicesClone(path), step{key: "cpu"}), *s.AdditionalProperties.Schema)...)
		}
		return out
	}
	return nil
}

func slicesClone(p []step) []step { return append([]step(nil), p...) }

func runProbes(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string, base map[string]any, probes []probe) (refused, stored int) {
	decoder := serializer.NewCodecFactory(scheme.New()).UniversalDeserializer()
	var mu sync.Mutex
	work := make(chan probe)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				spec := deepCopy(base)
				if !set(spec, p.path, p.value) {
					continue // the path runs through a value the baseline does not have
				}
				obj, err := submit(crd, version, spec)
				mu.Lock()
				switch {
				case err != nil:
					refused++
					if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
						t.Errorf("%s: refused, but not as invalid input: %v", p, err)
					} else if !strings.Contains(err.Error(), lastName(p.path)) {
						t.Errorf("%s: the refusal does not name the field: %v", p, err)
					}
				default:
					stored++
					raw, _ := json.Marshal(obj.Object)
					if _, _, err := decoder.Decode(raw, nil, nil); err != nil {
						t.Errorf("%s: stored, but an informer cannot decode it: %v", p, err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range probes {
		work <- p
	}
	close(work)
	wg.Wait()
	return refused, stored
}

var probeNames struct {
	sync.Mutex
	n int
}

// submit creates an object of the CRD's kind with spec as a server-side dry run, and returns
// what the API server would store.
func submit(crd *apiextensionsv1.CustomResourceDefinition, version string, spec map[string]any) (*unstructured.Unstructured, error) {
	probeNames.Lock()
	probeNames.n++
	name := fmt.Sprintf("probe-%d", probeNames.n)
	probeNames.Unlock()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(crd.Spec.Group + "/" + version)
	u.SetKind(crd.Spec.Names.Kind)
	u.SetName(name)
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		u.SetNamespace(namespace)
	}
	err := env.Client.Create(context.Background(), u, client.DryRunAll)
	return u, err
}

// set puts value at path in spec, through maps and arrays the baseline has (a map key is
// added). It reports false when the path does not exist in spec.
func set(spec map[string]any, path []step, value any) bool {
	if len(path) == 0 {
		return false // the spec itself is not probed as a value
	}
	var cur any = spec
	for i, s := range path {
		last := i == len(path)-1
		switch {
		case s.field != "" || s.key != "":
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			name := s.field + s.key
			if last {
				m[name] = value
				return true
			}
			next, ok := m[name]
			if !ok {
				return false
			}
			cur = next
		default:
			a, ok := cur.([]any)
			if !ok || s.index >= len(a) {
				return false
			}
			if last {
				a[s.index] = value
				return true
			}
			cur = a[s.index]
		}
	}
	return false
}

func deepCopy(m map[string]any) map[string]any {
	raw, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	out := map[string]any{}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		panic(err)
	}
	return out
}

// jwksCRD is the JWKSConfig CRD as the project ships it.
func jwksCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if crd.Spec.Names.Kind == "JWKSConfig" {
			return crd
		}
	}
	t.Fatal("no JWKSConfig CRD")
	return nil
}

// TestIssuerSpellingsAdmittedAsTheCodeReadsThem: the API server admits spec.issuer exactly
// when jwkset.IssuerKey reads it, so no issuer is stored that the controller and the JWKS
// server cannot put in their one spelling (or would put in a second one); a refusal names
// the field and says why.
func TestIssuerSpellingsAdmittedAsTheCodeReadsThem(t *testing.T) {
	crd := jwksCRD(t)
	for _, issuer := range []string{
		"https://idp.example", "https://idp.example/", "https://IdP.Example:8443/bob/", "https://idp.example./a",
		"https://[::1]:8443/x", "https://10.0.0.1/x", "https://xn--bcher-kva.example/a", "https://idp.example/a-b_c~d.e/f",
		"https://held.example/%68", "https://pathbound.example/t%65am", "https://idp.example/a%2Fb",
		"https://idp.example//bob", "https://idp.example/a/./b", "https://idp.example/a/../bob", "https://idp.example/..",
		"https://bücher.example/a", "https://idp.example/ä", "https://idp.example/a b", "https://user@idp.example/x",
		"https://idp.example/x?a=b", "http://idp.example/x", "https://", "https:///x",
	} {
		spec := deepCopy(baselines["JWKSConfig"])
		spec["issuer"] = issuer
		_, admitErr := submit(crd, "v1alpha1", spec)
		_, keyErr := jwkset.IssuerKey(issuer)
		switch {
		case admitErr == nil && keyErr != nil:
			t.Errorf("issuer %q admitted, but the controller cannot read it: %v", issuer, keyErr)
		case admitErr != nil && keyErr == nil:
			t.Errorf("issuer %q refused, but the controller reads it: %v", issuer, admitErr)
		case admitErr != nil && !strings.Contains(admitErr.Error(), "spec.issuer: Invalid value"):
			t.Errorf("issuer %q refused without naming spec.issuer: %v", issuer, admitErr)
		}
	}
}

// TestDurationsRefusedWithExample: the durations the issue names are refused with a message
// naming the field and showing a valid example.
func TestDurationsRefusedWithExample(t *testing.T) {
	crd := jwksCRD(t)
	for _, field := range []string{"oldKeysTTL", "cacheMaxAge"} {
		for _, value := range []string{"30d", "1 h", "-5m", "1.5h", "720"} {
			spec := deepCopy(baselines["JWKSConfig"])
			spec[field] = value
			_, err := submit(crd, "v1alpha1", spec)
			want := fmt.Sprintf("spec.%s: Invalid value: %q: must be a duration such as 720h", field, value)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%q: got %v, want a refusal containing %q", field, value, err, want)
			}
		}
	}
}

// TestPromotionNeedsASigningSecretAndAnIssuer: spec.promotion is refused, naming the
// field, without spec.signingSecret (only a key copied there is promoted) and for a
// relying party without an issuer when spec.issuer is not set either (its metrics are
// keyed by the issuer's hash); a relying party's metricsURL must be https.
func TestPromotionNeedsASigningSecretAndAnIssuer(t *testing.T) {
	crd := jwksCRD(t)
	parties := func(spec map[string]any) map[string]any {
		return spec["promotion"].(map[string]any)["relyingParties"].([]any)[0].(map[string]any)
	}
	for _, tc := range []struct {
		name   string
		mutate func(spec map[string]any)
		want   string
	}{
		{"no signing Secret", func(spec map[string]any) { delete(spec, "signingSecret") }, "spec.promotion: Invalid value: spec.promotion needs spec.signingSecret"},
		{"no issuer anywhere", func(spec map[string]any) { delete(spec, "issuer"); delete(parties(spec), "issuer") },
			"spec.promotion.relyingParties: Invalid value: each relying party needs an issuer when spec.issuer is not set"},
		{"plain http", func(spec map[string]any) { parties(spec)["metricsURL"] = "http://10.0.0.10:6443/metrics" },
			"spec.promotion.relyingParties[0].metricsURL: Invalid value: \"http://10.0.0.10:6443/metrics\": must be an https URL"},
	} {
		spec := deepCopy(baselines["JWKSConfig"])
		tc.mutate(spec)
		if _, err := submit(crd, "v1alpha1", spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a refusal containing %q", tc.name, err, tc.want)
		}
	}
	spec := deepCopy(baselines["JWKSConfig"])
	delete(parties(spec), "issuer") // spec.issuer stands for it
	if _, err := submit(crd, "v1alpha1", spec); err != nil {
		t.Errorf("a relying party taking spec.issuer: %v", err)
	}
}
