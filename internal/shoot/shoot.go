// Package shoot maps a Cluster to the Gardener Shoot (core.gardener.cloud/v1beta1) that
// provisions it, and reads a Shoot's progress back. It has no Kubernetes client: the
// Cluster operator applies what Desired returns and reports what Progress says.
package shoot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// GVK is the Gardener Shoot kind.
var GVK = schema.GroupVersionKind{Group: "core.gardener.cloud", Version: "v1beta1", Kind: "Shoot"}

const (
	// ClusterNamespaceLabel and ClusterNameLabel on a Shoot name the Cluster it serves.
	ClusterNamespaceLabel = "operator.kyma-project.io/cluster-namespace"
	ClusterNameLabel      = "operator.kyma-project.io/cluster-name"
	// ConfirmDeletionAnnotation must be "true" before Gardener accepts a Shoot's deletion.
	ConfirmDeletionAnnotation = "confirmation.gardener.cloud/deletion"
	// WorkerPool names the one worker pool of a Cluster's Shoot.
	WorkerPool = "cpu-worker-0"
)

// Params are the operator-wide settings of every Shoot.
type Params struct {
	// Namespace is the Gardener project namespace the Shoots live in.
	Namespace string
	// CloudProfiles maps a provider (aws, azure, gcp, openstack) to its CloudProfile name.
	CloudProfiles map[string]string
	// KubernetesVersion pins the Shoots' version; empty lets Gardener choose.
	KubernetesVersion string
	// Networking is the Shoots' network layout.
	Networking Networking
}

// Networking is spec.networking of a Shoot.
type Networking struct {
	Type     string
	Nodes    string
	Pods     string
	Services string
}

// DefaultParams are the defaults kyma-environment-broker uses for its Shoots.
func DefaultParams() Params {
	return Params{
		Namespace:     "garden-kyma",
		CloudProfiles: map[string]string{"aws": "aws", "azure": "az", "gcp": "gcp", "openstack": "converged-cloud-cp"},
		Networking:    Networking{Type: "calico", Nodes: "10.250.0.0/16", Pods: "100.64.0.0/12", Services: "100.104.0.0/13"},
	}
}

// Name is the Shoot of a Cluster: short (Gardener limits project plus shoot name to 21
// characters), stable and different for different Clusters.
func Name(clusterNamespace, clusterName string) string {
	sum := sha256.Sum256([]byte(clusterNamespace + "/" + clusterName))
	return "c-" + hex.EncodeToString(sum[:])[:7]
}

// providerTypes maps the Cluster's provider names to Gardener's provider types.
var providerTypes = map[string]string{"aws": "aws", "azure": "azure", "gcp": "gcp", "openstack": "openstack"}

// Zones are the first n availability zones of region, named as each provider names them.
func Zones(provider, region string, n int) ([]string, error) {
	var suffixes []string
	switch provider {
	case "aws":
		suffixes = []string{"a", "b", "c"}
	case "gcp":
		suffixes = []string{"-a", "-b", "-c"}
	case "openstack":
		suffixes = []string{"a", "b", "d"}
	case "azure":
		zones := []string{"1", "2", "3"}
		if n > len(zones) {
			return nil, fmt.Errorf("numberOfZones %d: azure regions have %d zones", n, len(zones))
		}
		return zones[:n], nil
	default:
		return nil, fmt.Errorf("provider %q is not one of aws, azure, gcp, openstack", provider)
	}
	if n > len(suffixes) {
		return nil, fmt.Errorf("numberOfZones %d: %s regions have %d zones", n, provider, len(suffixes))
	}
	out := make([]string, n)
	for i := range out {
		out[i] = region + suffixes[i]
	}
	return out, nil
}

// Validate lists what a Cluster provisioned through Gardener is missing.
func Validate(spec operatorv1alpha1.ClusterSpec) error {
	var problems []string
	infra := spec.Infrastructure
	if infra.Provider == "" {
		problems = append(problems, "spec.infrastructure.provider is required")
	} else if providerTypes[infra.Provider] == "" {
		problems = append(problems, fmt.Sprintf("spec.infrastructure.provider %q is not one of aws, azure, gcp, openstack", infra.Provider))
	}
	if spec.Core.Region == "" {
		problems = append(problems, "spec.core.region is required")
	}
	if infra.MachineType == "" {
		problems = append(problems, "spec.infrastructure.machineType is required")
	}
	if infra.AutoScalerMax == 0 {
		problems = append(problems, "spec.infrastructure.autoScalerMax is required")
	}
	if _, err := extensions(spec); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// Desired is the Shoot for cluster, using the credential credentialsBinding (the
// subscription's assignment), as a server-side apply patch.
func Desired(cluster *operatorv1alpha1.Cluster, p Params, credentialsBinding string) (*unstructured.Unstructured, error) {
	if err := Validate(cluster.Spec); err != nil {
		return nil, err
	}
	spec := cluster.Spec
	infra := spec.Infrastructure
	profile := p.CloudProfiles[infra.Provider]
	if profile == "" {
		return nil, fmt.Errorf("no cloud profile configured for provider %q", infra.Provider)
	}
	zones, err := Zones(infra.Provider, spec.Core.Region, int(max(infra.NumberOfZones, 1)))
	if err != nil {
		return nil, err
	}
	worker := map[string]any{
		"name":           WorkerPool,
		"machine":        map[string]any{"type": infra.MachineType},
		"minimum":        int64(infra.AutoScalerMin),
		"maximum":        int64(infra.AutoScalerMax),
		"maxSurge":       int64(len(zones)),
		"maxUnavailable": int64(0),
		"zones":          toAny(zones),
	}
	shootSpec := map[string]any{
		"cloudProfile":           map[string]any{"kind": "CloudProfile", "name": profile},
		"region":                 spec.Core.Region,
		"credentialsBindingName": credentialsBinding,
		"purpose":                purpose(spec.Core.Purpose),
		"provider":               map[string]any{"type": providerTypes[infra.Provider], "workers": []any{worker}},
		"networking": map[string]any{"type": p.Networking.Type, "nodes": p.Networking.Nodes,
			"pods": p.Networking.Pods, "services": p.Networking.Services},
	}
	kubernetes := map[string]any{}
	if p.KubernetesVersion != "" {
		kubernetes["version"] = p.KubernetesVersion
	}
	if oidc := spec.OIDCConfig; oidc != nil {
		kubernetes["kubeAPIServer"] = map[string]any{"oidcConfig": oidcConfig(oidc)}
	}
	if len(kubernetes) > 0 {
		shootSpec["kubernetes"] = kubernetes
	}
	if ext, _ := extensions(spec); len(ext) > 0 {
		shootSpec["extensions"] = ext
	}
	labels := map[string]any{ClusterNamespaceLabel: cluster.Namespace, ClusterNameLabel: cluster.Name}
	for _, key := range []string{"plan", "globalaccountid", "subaccountid", "instanceid"} {
		if v, ok := cluster.Labels[key]; ok {
			labels[key] = v
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": Name(cluster.Namespace, cluster.Name), "namespace": p.Namespace, "labels": labels},
		"spec":     shootSpec,
	}}
	u.SetGroupVersionKind(GVK)
	return u, nil
}

// purpose defaults to development, as Gardener does.
func purpose(p string) string {
	if p == "" {
		return "development"
	}
	return p
}

func oidcConfig(o *operatorv1alpha1.OIDCConfig) map[string]any {
	out := map[string]any{"clientID": o.ClientID, "issuerURL": o.IssuerURL}
	for key, v := range map[string]string{"groupsClaim": o.GroupsClaim, "usernameClaim": o.UsernameClaim, "usernamePrefix": o.UsernamePrefix} {
		if v != "" {
			out[key] = v
		}
	}
	if len(o.SigningAlgs) > 0 {
		out["signingAlgs"] = toAny(o.SigningAlgs)
	}
	return out
}

var toggle = regexp.MustCompile(`^([a-z][a-zA-Z0-9]*)Disabled$`)

// extensions turns spec.extensions into the Shoot's extension list. Two forms are
// accepted: Gardener's own list ([{type, disabled, providerConfig}]) passed through, and
// the seed's toggles ({shootNetworkingFilterDisabled: true}), each naming an extension
// type in camel case.
func extensions(spec operatorv1alpha1.ClusterSpec) ([]any, error) {
	if spec.Extensions == nil || len(spec.Extensions.Raw) == 0 {
		return nil, nil
	}
	var list []any
	if err := json.Unmarshal(spec.Extensions.Raw, &list); err == nil {
		for i, e := range list {
			m, ok := e.(map[string]any)
			if t, _ := m["type"].(string); !ok || t == "" {
				return nil, fmt.Errorf("spec.extensions[%d] needs a type", i)
			}
		}
		return list, nil
	}
	var toggles map[string]any
	if err := json.Unmarshal(spec.Extensions.Raw, &toggles); err != nil {
		return nil, errors.New("spec.extensions must be a list of Gardener extensions or an object of <extension>Disabled toggles")
	}
	keys := make([]string, 0, len(toggles))
	for k := range toggles {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		m := toggle.FindStringSubmatch(k)
		disabled, isBool := toggles[k].(bool)
		if m == nil || !isBool {
			return nil, fmt.Errorf("spec.extensions.%s: only <extension>Disabled: true|false toggles are understood", k)
		}
		out = append(out, map[string]any{"type": kebab(m[1]), "disabled": disabled})
	}
	return out, nil
}

// kebab turns shootNetworkingFilter into shoot-networking-filter.
func kebab(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('-')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Phase is where a Shoot is, from status.lastOperation.
type Phase string

const (
	PhasePending   Phase = "Pending"   // no operation reported yet
	PhaseRunning   Phase = "Running"   // Processing or Pending
	PhaseSucceeded Phase = "Succeeded" // the last create/reconcile succeeded
	PhaseError     Phase = "Error"     // failed for now; Gardener retries
	PhaseFailed    Phase = "Failed"    // failed for good; needs a change or an operator
	PhaseDeleting  Phase = "Deleting"  // a Delete operation is under way
)

// Progress is a Shoot's last operation.
type Progress struct {
	Phase       Phase
	Type        string
	State       string
	Percent     int64
	Description string
}

// Message is a one-line human summary.
func (p Progress) Message() string {
	if p.Type == "" {
		return "waiting for Gardener to start provisioning"
	}
	msg := fmt.Sprintf("%s %s (%d%%)", p.Type, strings.ToLower(p.State), p.Percent)
	if p.Description != "" {
		msg += ": " + p.Description
	}
	return msg
}

// Provisioned: the cluster exists — its creation succeeded, or Gardener has moved on to
// reconciling (or restoring, migrating) it, which it does while the cluster serves.
func (p Progress) Provisioned() bool {
	switch p.Type {
	case "", "Delete":
		return false
	case "Create":
		return p.State == "Succeeded"
	default:
		return true
	}
}

// ProgressOf reads status.lastOperation of a live Shoot.
func ProgressOf(live *unstructured.Unstructured) Progress {
	op, _, _ := unstructured.NestedMap(live.Object, "status", "lastOperation")
	p := Progress{}
	p.Type, _, _ = unstructured.NestedString(op, "type")
	p.State, _, _ = unstructured.NestedString(op, "state")
	p.Description, _, _ = unstructured.NestedString(op, "description")
	p.Percent, _, _ = unstructured.NestedInt64(op, "progress")
	switch {
	case p.Type == "":
		p.Phase = PhasePending
	case p.Type == "Delete":
		p.Phase = PhaseDeleting
	case p.State == "Succeeded":
		p.Phase = PhaseSucceeded
	case p.State == "Error":
		p.Phase = PhaseError
	case p.State == "Failed" || p.State == "Aborted":
		p.Phase = PhaseFailed
	default:
		p.Phase = PhaseRunning
	}
	return p
}
