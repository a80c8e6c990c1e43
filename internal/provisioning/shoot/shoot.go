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
	"math"
	"math/big"
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
	// WorkerPool names the one worker pool of a Cluster's Shoot.
	WorkerPool = "cpu-worker-0"
)

// Params are the operator-wide settings of every Shoot: what Gardener operators differ on
// (flags of the manager, see internal/provisioning/garden). A Cluster may override the CIDRs
// (spec.infrastructure.networking).
type Params struct {
	// Namespace is the Gardener project namespace the Shoots live in.
	Namespace string
	// CloudProfiles maps a provider (aws, azure, gcp, openstack) to its CloudProfile name.
	CloudProfiles map[string]string
	// KubernetesVersion pins the Shoots' version; empty lets Gardener choose (its admission
	// defaults it to the newest supported version of the CloudProfile).
	KubernetesVersion string
	// Networking is the Shoots' default network layout.
	Networking Networking
	// MachineImage of the worker pool; an empty Version lets Gardener choose (its
	// admission defaults it to the newest version of that image in the CloudProfile).
	MachineImage MachineImage
	// VolumeTypes maps a provider to the worker root volume type. AWS, Azure and GCP
	// require a volume; for OpenStack an empty type means no volume (the flavour's disk).
	VolumeTypes map[string]string
	// VolumeSize of the worker root volume, as Gardener wants it: "<n>Gi".
	VolumeSize string
	// OpenStack are the settings only OpenStack Shoots need.
	OpenStack OpenStack
	// Maintenance is the Shoots' maintenance time window.
	Maintenance Maintenance
	// HAFailureTolerance is the control plane's failure tolerance ("zone" or "node") for
	// purpose production; empty: no highly available control plane.
	HAFailureTolerance string
	// Landscape is what the landscape adds to every Shoot (configuration file only).
	Landscape Landscape
}

// Networking is spec.networking of a Shoot.
type Networking struct {
	Type     string
	Nodes    string
	Pods     string
	Services string
}

// MachineImage is a worker pool's operating system image.
type MachineImage struct {
	Name    string
	Version string
}

// OpenStack are the provider settings that name objects of the OpenStack installation.
type OpenStack struct {
	// FloatingPoolName is the external network the shoot's router and load balancers use.
	FloatingPoolName string
	// LoadBalancerProvider is the Octavia provider of the shoot's load balancers.
	LoadBalancerProvider string
}

// Maintenance is spec.maintenance.timeWindow, in Gardener's "HHMMSS+ZZZZ" form; both
// empty lets Gardener pick a window.
type Maintenance struct {
	Begin string
	End   string
}

// DefaultParams are the defaults kyma-environment-broker and infrastructure-manager use
// for their Shoots.
func DefaultParams() Params {
	return Params{
		Namespace:          "garden-kyma",
		CloudProfiles:      map[string]string{"aws": "aws", "azure": "az", "gcp": "gcp", "openstack": "converged-cloud-kyma"},
		Networking:         Networking{Type: "calico", Nodes: "10.250.0.0/16", Pods: "100.64.0.0/12", Services: "100.104.0.0/13"},
		MachineImage:       MachineImage{Name: "gardenlinux"},
		VolumeTypes:        map[string]string{"aws": "gp3", "azure": "StandardSSD_LRS", "gcp": "pd-balanced"},
		VolumeSize:         "80Gi",
		OpenStack:          OpenStack{FloatingPoolName: "FloatingIP-external-kyma-01", LoadBalancerProvider: "f5"},
		Maintenance:        Maintenance{Begin: "220000+0000", End: "010000+0000"},
		HAFailureTolerance: "zone",
	}
}

// Name is the Shoot of a Cluster provisioned from now on, where the project name leaves
// room for it (Params.NameOf shortens it where not): stable, NameLength characters, a
// letter then 14 of [a-z0-9], taken from the SHA-256 of "<namespace>/<name>" (a '/' is in
// neither, so the input is unambiguous): 77 bits. Finding another Cluster name with the
// same Shoot name, to take a tenant's name before she creates her Cluster, costs about
// 2^77 hashes. Earlier versions named it LegacyName (28 bits).
func Name(clusterNamespace, clusterName string) string {
	sum := sha256.Sum256([]byte(clusterNamespace + "/" + clusterName))
	n := new(big.Int).SetBytes(sum[:])
	var b strings.Builder
	b.WriteByte(nameDigits[mod(n, 26)]) // a letter first: a DNS label that reads as a name
	for range NameLength - 1 {
		b.WriteByte(nameDigits[mod(n, int64(len(nameDigits)))])
	}
	return b.String()
}

const (
	// NameLength is the length of the names Name makes.
	NameLength = 15
	// gardenNameLimit is the most characters Gardener allows a new Shoot's project name and
	// name together (gardener/gardener plugin/pkg/shoot/validator/admission.go).
	gardenNameLimit = 21
	// minNameLength keeps a shortened name no shorter than the legacy one.
	minNameLength = 9
)

const nameDigits = "abcdefghijklmnopqrstuvwxyz0123456789"

// mod divides n by m in place and returns the remainder.
func mod(n *big.Int, m int64) int64 {
	_, r := n.DivMod(n, big.NewInt(m), new(big.Int))
	return r.Int64()
}

// NameBits is how many bits of the hash a name of length n made by Name carries.
func NameBits(n int) float64 { return math.Log2(26) + float64(n-1)*math.Log2(36) }

// LegacyName is the Shoot name versions before the 77-bit names gave a Cluster: "c-" and
// the first 7 hex digits of the same hash.
func LegacyName(clusterNamespace, clusterName string) string {
	sum := sha256.Sum256([]byte(clusterNamespace + "/" + clusterName))
	return "c-" + hex.EncodeToString(sum[:])[:7]
}

// Project is the Gardener project of the Shoots' namespace: "garden-<project>", or the
// namespace itself as Gardener takes it where the prefix is missing.
func (p Params) Project() string { return strings.TrimPrefix(p.Namespace, "garden-") }

// NameLength is the length of the Shoot names of this project: NameLength, or less where
// the project name would make Gardener refuse them (gardenNameLimit).
func (p Params) NameLength() int { return min(NameLength, gardenNameLimit-len(p.Project())) }

// NameOf is the Shoot of c: its LegacyName when its status says it was provisioned under
// that name (renaming would create a second Shoot), Name (cut to the project's
// NameLength: a prefix of a name is a name) otherwise. A status is no authority, but it
// can only choose between the Cluster's own two names, and the Shoot found under either
// is checked for this Cluster's owner labels before it is used.
func (p Params) NameOf(c *operatorv1alpha1.Cluster) string {
	if legacy := LegacyName(c.Namespace, c.Name); c.Status.ShootName == legacy {
		return legacy
	}
	return Name(c.Namespace, c.Name)[:p.NameLength()]
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

// Desired is the Shoot for cluster, using the credential credentialsBinding (the
// subscription's assignment), as a server-side apply patch: complete as Gardener and the
// provider extension of its type demand it (a *InvalidError lists every problem of a
// Cluster that Gardener would reject), with what p.Landscape adds (extend.go). A landscape
// that makes audit logging mandatory without a tenant for the Cluster's provider and
// region gives an *AuditLogTenantMissingError instead of a Shoot without audit logging.
//
// shoot-oidc-service is not enabled (infrastructure-manager enables it for the
// OpenIDConnect resources of its additionalOidc path, which trustplane does not make): a
// Cluster that wants it lists it in spec.extensions.
func Desired(cluster *operatorv1alpha1.Cluster, p Params, credentialsBinding string) (*unstructured.Unstructured, error) {
	if err := Validate(cluster.Spec, p); err != nil {
		return nil, err
	}
	if err := CheckAuditLog(cluster.Spec, p); err != nil {
		return nil, err
	}
	spec := cluster.Spec
	infra := spec.Infrastructure
	zones, err := zonesOf(spec)
	if err != nil {
		return nil, &InvalidError{Problems: []string{err.Error()}}
	}
	nw := networkingOf(infra, p)
	name := p.NameOf(cluster)
	infraConfig, controlPlaneConfig, err := providerConfigs(infra.Provider, nw.Nodes, zones, p)
	if err != nil {
		return nil, &InvalidError{Problems: []string{err.Error()}}
	}
	networking := map[string]any{"type": nw.Type, "nodes": nw.Nodes, "pods": nw.Pods, "services": nw.Services}
	if dualStack(spec) {
		// extender/networking/networking.go: IPv4 first; on AWS the VPC gets its IPv6
		// range and the load balancer controller serves both (hyperscaler/aws/config.go).
		networking["ipFamilies"] = []any{"IPv4", "IPv6"}
		if infra.Provider == "aws" {
			infraConfig["dualStack"] = map[string]any{"enabled": true}
			controlPlaneConfig["loadBalancerController"] = map[string]any{"enabled": true}
		}
	}
	provider := map[string]any{
		"type":                 providerTypes[infra.Provider],
		"infrastructureConfig": infraConfig,
		"workers":              workersOf(spec, zones, p),
		// Nodes are reached through the API server only, as infrastructure-manager sets it.
		"workersSettings": map[string]any{"sshAccess": map[string]any{"enabled": false}},
	}
	if controlPlaneConfig != nil {
		provider["controlPlaneConfig"] = controlPlaneConfig
	}
	shootSpec := map[string]any{
		"cloudProfile":           map[string]any{"kind": "CloudProfile", "name": p.CloudProfiles[infra.Provider]},
		"region":                 spec.Core.Region,
		"credentialsBindingName": credentialsBinding,
		"purpose":                purpose(spec.Core.Purpose),
		"provider":               provider,
		"networking":             networking,
		"maintenance":            maintenanceOf(spec.Core, p),
	}
	if purpose(spec.Core.Purpose) == "production" && p.HAFailureTolerance != "" {
		// Gardener spreads a production control plane over zones (or nodes) of its seed
		// only when asked to.
		shootSpec["controlPlane"] = map[string]any{"highAvailability": map[string]any{
			"failureTolerance": map[string]any{"type": p.HAFailureTolerance}}}
	}
	kubernetes := map[string]any{}
	if v := kubernetesVersionOf(spec, p); v != "" {
		kubernetes["version"] = v
	}
	kubeAPIServer := map[string]any{}
	if config := serviceAccountConfigOf(spec, p); config != nil {
		kubeAPIServer["serviceAccountConfig"] = config
	}
	if oidcOf(spec, p) != nil {
		// kubeAPIServer.oidcConfig is forbidden for Kubernetes >= 1.32: OIDC goes through
		// structured authentication, a ConfigMap beside the Shoot (AuthenticationConfigMap).
		kubeAPIServer["structuredAuthentication"] = map[string]any{"configMapName": AuthenticationConfigMapName(name)}
	}
	var resources []any
	if t, ok := auditLogTenant(spec, p); ok {
		// infrastructure-manager extender/auditlogs: the audit policy ConfigMap of the
		// landscape and the tenant's credentials as the resource the extension names.
		kubeAPIServer["auditConfig"] = map[string]any{"auditPolicy": map[string]any{
			"configMapRef": map[string]any{"name": p.Landscape.AuditLog.PolicyConfigMapName}}}
		resources = append(resources, map[string]any{"name": AuditLogCredentialsResource,
			"resourceRef": map[string]any{"apiVersion": "v1", "kind": "Secret", "name": t.SecretName}})
	}
	if len(kubeAPIServer) > 0 {
		kubernetes["kubeAPIServer"] = kubeAPIServer
	}
	if len(kubernetes) > 0 {
		shootSpec["kubernetes"] = kubernetes
	}
	if resources != nil {
		shootSpec["resources"] = resources
	}
	if dns := dnsOf(name, p); dns != nil {
		shootSpec["dns"] = dns
	}
	if class := p.Landscape.ExposureClasses[infra.Provider]; class != "" {
		shootSpec["exposureClassName"] = class
	}
	if EUAccessOnly(cluster, p) {
		shootSpec["accessRestrictions"] = euAccessRestrictions()
	}
	if tolerations := tolerationsOf(spec.Core.Region, p); tolerations != nil {
		shootSpec["tolerations"] = tolerations
	}
	ext, _ := extensions(spec)
	ext = mergeExtensions(ext, clusterExtensions(spec, p))
	if ext = mergeExtensions(ext, landscapeExtensions(spec, p)); len(ext) > 0 {
		shootSpec["extensions"] = ext
	}
	labels := map[string]any{operatorv1alpha1.ClusterNamespaceLabel: cluster.Namespace, operatorv1alpha1.ClusterNameLabel: cluster.Name}
	for _, key := range []string{"plan", "globalaccountid", "subaccountid", "instanceid"} {
		if v, ok := cluster.Labels[key]; ok {
			labels[key] = v
		}
	}
	metadata := map[string]any{"name": name, "namespace": p.Namespace, "labels": labels}
	if p.Landscape.InfrastructureManagerMetadata {
		annotations := map[string]any{}
		kimMetadata(cluster, labels, annotations)
		metadata["annotations"] = annotations
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": metadata, "spec": shootSpec}}
	u.SetGroupVersionKind(GVK)
	return u, nil
}

// clusterExtensions are the extensions the Cluster's own fields ask for: its registry
// caches and its API server ACL. Each replaces an entry of its type in spec.extensions.
func clusterExtensions(spec operatorv1alpha1.ClusterSpec, p Params) []any {
	var out []any
	for _, e := range []map[string]any{registryCacheExtension(spec), aclExtension(spec, p)} {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// purpose defaults to development, as Gardener does.
func purpose(p string) string {
	if p == "" {
		return "development"
	}
	return p
}

func numberOfZones(infra operatorv1alpha1.ClusterInfrastructure) int {
	return int(max(infra.NumberOfZones, 1))
}

// networkingOf is the operator's network layout with the Cluster's overrides.
func networkingOf(infra operatorv1alpha1.ClusterInfrastructure, p Params) Networking {
	nw := p.Networking
	if o := infra.Networking; o != nil {
		for _, f := range []struct {
			to   *string
			from string
		}{{&nw.Nodes, o.Nodes}, {&nw.Pods, o.Pods}, {&nw.Services, o.Services}} {
			if f.from != "" {
				*f.to = f.from
			}
		}
	}
	return nw
}

func imageOf(p Params) map[string]any {
	if p.MachineImage.Name == "" {
		return nil
	}
	image := map[string]any{"name": p.MachineImage.Name}
	if p.MachineImage.Version != "" {
		image["version"] = p.MachineImage.Version
	}
	return image
}

// volumeOf is the worker root volume: AWS, Azure and GCP require one (type and size);
// OpenStack forbids a type without a size and boots from the flavour's disk without one.
func volumeOf(provider string, p Params) map[string]any {
	t := p.VolumeTypes[provider]
	if t == "" {
		return nil
	}
	return map[string]any{"type": t, "size": p.VolumeSize}
}

// maintenanceOf is spec.maintenance: what Gardener updates (the landscape's
// autoUpdate, on by default) and when: a production Shoot in a region the landscape
// lists gets that region's window (infrastructure-manager
// internal/controller/runtime/fsm/maintenanceWindow.go), every other Shoot the
// operator's window (--shoot-maintenance-begin/end).
func maintenanceOf(core operatorv1alpha1.ClusterCore, p Params) map[string]any {
	update := p.Landscape.Maintenance.AutoUpdate
	m := map[string]any{"autoUpdate": map[string]any{"kubernetesVersion": boolOr(update.KubernetesVersion, true),
		"machineImageVersion": boolOr(update.MachineImageVersion, true)}}
	window := p.Maintenance
	if w, ok := p.Landscape.Maintenance.Windows[core.Region]; ok && purpose(core.Purpose) == "production" {
		window = Maintenance(w)
	}
	if window.Begin != "" {
		m["timeWindow"] = map[string]any{"begin": window.Begin, "end": window.End}
	}
	return m
}

func boolOr(b *bool, otherwise bool) bool {
	if b == nil {
		return otherwise
	}
	return *b
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

// SpecReconciled says whether Gardener's last operation on a live Shoot covered its
// current spec (status.observedGeneration is metadata.generation) and how it ended:
// done when it succeeded, failed when it failed (for now or for good).
func SpecReconciled(live *unstructured.Unstructured) (done, failed bool) {
	observed, _, _ := unstructured.NestedInt64(live.Object, "status", "observedGeneration")
	if observed < live.GetGeneration() {
		return false, false
	}
	switch ProgressOf(live).Phase {
	case PhaseSucceeded:
		return true, false
	case PhaseError, PhaseFailed:
		return false, true
	}
	return false, false
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
