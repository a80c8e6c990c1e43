package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// The test garden's landscape: what its ControllerRegistrations register, its
// CloudProfiles (with the regions that offer EU access) and ExposureClasses, and the
// objects the landscape keeps in the project namespace (audit policy, audit-log and DNS
// credentials). testdata/garden-landscape.yaml holds the CloudProfiles and ExposureClasses; the
// CRDs standing in for Gardener's are in testdata/landscape-crds.yaml.

// registeredExtensions are the Extension types this garden's ControllerRegistrations
// register; registeredDNSRecords the DNSRecord types (provider extensions register them).
var (
	registeredExtensions = []string{"acl", "registry-cache", "shoot-auditlog-service", "shoot-cert-service", "shoot-dns-service", "shoot-networking-filter", "shoot-oidc-service"}
	registeredDNSRecords = []string{"aws-route53", "azure-dns", "google-clouddns", "openstack-designate"}
)

// The landscape's objects in the project namespace.
const (
	auditPolicyConfigMap = "kyma-audit-policy"
	auditLogSecret       = "auditlog-credentials-test"
	dnsSecret            = "route53-test"
)

var (
	cloudProfileGVK  = schema.GroupVersionKind{Group: "core.gardener.cloud", Version: "v1beta1", Kind: "CloudProfile"}
	exposureClassGVK = schema.GroupVersionKind{Group: "core.gardener.cloud", Version: "v1beta1", Kind: "ExposureClass"}
)

// prepareLandscape installs the CloudProfile and ExposureClass stand-ins, this garden's
// CloudProfiles and ExposureClasses, and the landscape's objects in the project namespace.
func prepareLandscape() error {
	if _, err := envtest.InstallCRDs(mgmt.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "landscape-crds.yaml")}, ErrorIfPathMissing: true}); err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "garden-landscape.yaml"))
	if err != nil {
		return err
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	policy := "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: projectNamespace, Name: auditPolicyConfigMap}, Data: map[string]string{"policy": policy}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: projectNamespace, Name: auditLogSecret}, StringData: map[string]string{"clientID": "x", "clientSecret": "y"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: projectNamespace, Name: dnsSecret}, StringData: map[string]string{"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}},
	} {
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// refusal is the garden's answer to a Shoot write an admission plugin or webhook refuses.
type refusal struct {
	code    int
	message string
}

func forbidden(format string, args ...any) *refusal {
	return &refusal{code: http.StatusForbidden, message: fmt.Sprintf(format, args...)}
}

// shootWritten is what the admission plugins below read of a Shoot write.
type shootWritten struct {
	Spec struct {
		Region       string `json:"region"`
		CloudProfile struct {
			Name string `json:"name"`
		} `json:"cloudProfile"`
		Kubernetes struct {
			Version       string `json:"version"`
			KubeAPIServer struct {
				StructuredAuthentication struct {
					ConfigMapName string `json:"configMapName"`
				} `json:"structuredAuthentication"`
				AuditConfig struct {
					AuditPolicy struct {
						ConfigMapRef struct {
							Name string `json:"name"`
						} `json:"configMapRef"`
					} `json:"auditPolicy"`
				} `json:"auditConfig"`
			} `json:"kubeAPIServer"`
		} `json:"kubernetes"`
		Extensions []struct {
			Type string `json:"type"`
		} `json:"extensions"`
		DNS struct {
			Providers []struct {
				Primary        bool   `json:"primary"`
				Type           string `json:"type"`
				CredentialsRef *struct {
					APIVersion string `json:"apiVersion"`
					Kind       string `json:"kind"`
					Name       string `json:"name"`
				} `json:"credentialsRef"`
			} `json:"providers"`
		} `json:"dns"`
		ExposureClassName string `json:"exposureClassName"`
		Resources         []struct {
			Name        string `json:"name"`
			ResourceRef struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Name       string `json:"name"`
			} `json:"resourceRef"`
		} `json:"resources"`
		AccessRestrictions []struct {
			Name string `json:"name"`
		} `json:"accessRestrictions"`
	} `json:"spec"`
}

// admit plays, for a write of a Shoot in namespace ns, what gardener-apiserver's admission
// plugins and gardener-admission-controller's webhooks refuse by looking other objects up
// (every check upstream runs only when the field changed; the front checks every write).
// It reads the request body and puts it back for the proxy. nil: admitted.
func (f *front) admit(r *http.Request, ns string) *refusal {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil // let the API server answer
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var s shootWritten
	if err := yaml.Unmarshal(body, &s); err != nil {
		return nil
	}
	ctx := r.Context()
	spec := s.Spec
	// [extval] gardener plugin/pkg/global/extensionvalidation/admission.go: every
	// extension type, and the primary DNS provider's type, registered.
	for i, e := range spec.Extensions {
		if !slices.Contains(registeredExtensions, e.Type) {
			return forbidden("given Shoot uses non-registered extension type: spec.extensions[%d].type (%q)", i, e.Type)
		}
	}
	for i, p := range spec.DNS.Providers {
		if p.Primary && p.Type != "" && p.Type != "unmanaged" && !slices.Contains(registeredDNSRecords, p.Type) {
			return forbidden("given Shoot uses non-registered extension type: spec.dns.providers[%d].type (%q)", i, p.Type)
		}
	}
	// [refmgr] gardener plugin/pkg/global/resourcereferencemanager/admission.go
	// ensureShootReferences: the CloudProfile, the ExposureClass, every spec.resources
	// object, the DNS providers' credentials and the structured-authentication ConfigMap
	// exist.
	var profile *unstructured.Unstructured
	if name := spec.CloudProfile.Name; name != "" {
		profile = &unstructured.Unstructured{}
		profile.SetGroupVersionKind(cloudProfileGVK)
		if err := f.garden.Get(ctx, types.NamespacedName{Name: name}, profile); apierrors.IsNotFound(err) {
			return forbidden("cloudprofiles.core.gardener.cloud %q not found", name)
		}
	}
	if name := spec.ExposureClassName; name != "" {
		class := &unstructured.Unstructured{}
		class.SetGroupVersionKind(exposureClassGVK)
		if err := f.garden.Get(ctx, types.NamespacedName{Name: name}, class); apierrors.IsNotFound(err) {
			return forbidden("exposureclasses.core.gardener.cloud %q not found", name)
		}
	}
	for _, res := range spec.Resources {
		if ref := res.ResourceRef; ref.APIVersion == "v1" && !f.exists(ctx, ns, ref.Kind, ref.Name) {
			return forbidden("failed to resolve resource reference %q: %s %q not found", res.Name, strings.ToLower(ref.Kind)+"s", ref.Name)
		}
	}
	for _, p := range spec.DNS.Providers {
		if ref := p.CredentialsRef; ref != nil && ref.APIVersion == "v1" && ref.Kind == "Secret" && !f.exists(ctx, ns, "Secret", ref.Name) {
			return forbidden("failed to resolve credentials reference of type Secret: secrets %q not found", ref.Name)
		}
	}
	if name := spec.Kubernetes.KubeAPIServer.StructuredAuthentication.ConfigMapName; name != "" && !f.exists(ctx, ns, "ConfigMap", name) {
		return forbidden("failed to resolve structured authentication config map reference: configmaps %q not found", name)
	}
	// [validator] gardener plugin/pkg/shoot/validator/admission.go
	// validateKubernetesVersionConstraints: the version is one the CloudProfile offers,
	// after gardener's mutator completed a minor version to the newest patch of it.
	if v := spec.Kubernetes.Version; v != "" && profile != nil {
		offered := profileVersions(profile)
		if !slices.Contains(offered, newestPatch(offered, v)) {
			return &refusal{code: http.StatusForbidden, message: fmt.Sprintf("spec.kubernetes.version: Unsupported value: %q: supported values: %q", v, offered)}
		}
	}
	// [validator] gardener plugin/pkg/shoot/validator/admission.go validateAccessRestrictions:
	// only access restrictions the CloudProfile offers in the Shoot's region.
	if len(spec.AccessRestrictions) > 0 && profile != nil {
		offered, inProfile := regionAccessRestrictions(profile, spec.Region)
		if !inProfile {
			return forbidden("spec.region: Invalid value: %q: region not present in CloudProfile", spec.Region)
		}
		for i, a := range spec.AccessRestrictions {
			if !slices.Contains(offered, a.Name) {
				return forbidden("spec.accessRestrictions[%d]: Unsupported value: %q: supported values: %q", i, a.Name, offered)
			}
		}
	}
	// [auditpolicy] gardener pkg/webhook/configvalidator/handler.go admitShoot: the audit
	// policy ConfigMap exists in the Shoot's namespace and its "policy" is an audit Policy;
	// the webhook answers 422.
	if name := spec.Kubernetes.KubeAPIServer.AuditConfig.AuditPolicy.ConfigMapRef.Name; name != "" {
		cm := &corev1.ConfigMap{}
		if err := f.garden.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); apierrors.IsNotFound(err) {
			return &refusal{code: http.StatusUnprocessableEntity, message: fmt.Sprintf("referenced audit policy ConfigMap %s/%s does not exist", ns, name)}
		}
		var policy struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["policy"]), &policy); err != nil || policy.Kind != "Policy" || !strings.HasPrefix(policy.APIVersion, "audit.k8s.io/") {
			return &refusal{code: http.StatusUnprocessableEntity, message: fmt.Sprintf("error getting audit policy from ConfigMap %s/%s: missing audit policy key in config map data", ns, name)}
		}
	}
	return nil
}

// exists says whether the core object kind/name exists in ns (true on other errors: the
// API server answers then).
func (f *front) exists(ctx context.Context, ns, kind, name string) bool {
	var obj client.Object
	switch kind {
	case "Secret":
		obj = &corev1.Secret{}
	case "ConfigMap":
		obj = &corev1.ConfigMap{}
	default:
		return true
	}
	return !apierrors.IsNotFound(f.garden.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj))
}

// profileVersions are the Kubernetes versions a CloudProfile offers.
func profileVersions(profile *unstructured.Unstructured) []string {
	versions, _, _ := unstructured.NestedSlice(profile.Object, "spec", "kubernetes", "versions")
	var out []string
	for _, v := range versions {
		if version, _ := v.(map[string]any)["version"].(string); version != "" {
			out = append(out, version)
		}
	}
	return out
}

// newestPatch is the newest of offered of the minor version v ("1.35" → "1.35.4"), as
// gardener's shoot mutator completes it; v itself when it has a patch already.
func newestPatch(offered []string, v string) string {
	if strings.Count(v, ".") != 1 {
		return v
	}
	for _, o := range offered { // newest first, as the test garden lists them
		if strings.HasPrefix(o, v+".") {
			return o
		}
	}
	return v
}

// regionAccessRestrictions are the access restrictions the CloudProfile offers in region.
func regionAccessRestrictions(profile *unstructured.Unstructured, region string) (names []string, inProfile bool) {
	regions, _, _ := unstructured.NestedSlice(profile.Object, "spec", "regions")
	for _, r := range regions {
		m, _ := r.(map[string]any)
		if m["name"] != region {
			continue
		}
		restrictions, _, _ := unstructured.NestedSlice(m, "accessRestrictions")
		for _, a := range restrictions {
			if name, _ := a.(map[string]any)["name"].(string); name != "" {
				names = append(names, name)
			}
		}
		return names, true
	}
	return nil, false
}
