package jwks

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

const (
	// OwnerLabel marks every object made for a JWKSConfig with its name. The controller's
	// private cache holds only objects with this label.
	OwnerLabel = "jwks.trustplane.io/jwksconfig"
	// RetirementsAnnotation on the JWKS ConfigMap records when each old key was retired,
	// so that rotation state survives restarts of the manager.
	RetirementsAnnotation = "jwks.trustplane.io/retired-at"
	// ConfigHashAnnotation on the nginx pod template is the hash of the nginx
	// configuration, so that a change to it (cacheMaxAge, discovery) rolls the pods: nginx
	// reads its configuration only at start.
	ConfigHashAnnotation = "jwks.trustplane.io/config-hash"
	// PodContentAnnotation is bumped on running nginx pods when the set changes: a pod
	// update makes the kubelet resync the pod's ConfigMap volumes at once, instead of on
	// its periodic sync a minute or more later. Not on the pod template, so no restart.
	PodContentAnnotation = "jwks.trustplane.io/jwks-hash"

	nginxPort      = 8080
	nginxHTMLDir   = "/usr/share/nginx/html"
	nginxConfigKey = "default.conf"
	defaultMaxAge  = 5 * time.Minute
	defaultTTL     = 720 * time.Hour
	defaultMaxKeys = 3
	// defaultReplicas is spec.nginx.replicas's default (the CRD's too).
	defaultReplicas int32 = 2
)

// spec accessors apply the API defaults also to objects stored before a default existed.

func jwksConfigMapName(c *jwksv1alpha1.JWKSConfig) string {
	if c.Spec.ConfigMapName != "" {
		return c.Spec.ConfigMapName
	}
	return c.Name + "-jwks"
}

func nginxConfigMapName(c *jwksv1alpha1.JWKSConfig) string {
	if c.Spec.NginxConfigMapName != "" {
		return c.Spec.NginxConfigMapName
	}
	return c.Name + "-nginx"
}

// validateSpec refuses what admission refuses today but an older CRD may have stored
// (a duration such as "30d", a quantity such as "1e1.5"): the object then reports
// InvalidSpec, naming every such field, instead of being reconciled with a guess.
func validateSpec(c *jwksv1alpha1.JWKSConfig) error {
	var problems []string
	for _, d := range []struct {
		field string
		value *jwksv1alpha1.Duration
	}{{"spec.oldKeysTTL", c.Spec.OldKeysTTL}, {"spec.cacheMaxAge", c.Spec.CacheMaxAge}} {
		if d.value == nil {
			continue
		}
		if _, err := d.value.Parse(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", d.field, err))
		}
	}
	for _, list := range []struct {
		field  string
		values map[corev1.ResourceName]jwksv1alpha1.Quantity
	}{{"limits", c.Spec.Nginx.Resources.Limits}, {"requests", c.Spec.Nginx.Resources.Requests}} {
		for _, name := range slices.Sorted(maps.Keys(list.values)) {
			if q := list.values[name]; !validQuantity(q) {
				problems = append(problems, fmt.Sprintf("spec.nginx.resources.%s[%s]: %q is not a quantity such as 100m, 0.5 or 64Mi", list.field, name, string(q)))
			}
		}
	}
	// Admission refuses these; one stored before the rule has no key to claim or serve.
	if c.Spec.Issuer != "" {
		if _, err := jwkset.IssuerKey(c.Spec.Issuer); err != nil {
			problems = append(problems, fmt.Sprintf("spec.issuer: %v", err))
		}
	}
	if len(problems) > 0 {
		return &jwkset.InputError{Reason: jwksv1alpha1.ReasonInvalidSpec, Message: strings.Join(problems, "; ")}
	}
	return nil
}

func validQuantity(q jwksv1alpha1.Quantity) bool {
	_, err := q.Parse()
	return err == nil
}

// containerResources converts the spec's quantities; one that does not parse is left out
// here (validateSpec reports it).
func containerResources(r jwksv1alpha1.NginxResources) corev1.ResourceRequirements {
	list := func(in map[corev1.ResourceName]jwksv1alpha1.Quantity) corev1.ResourceList {
		if len(in) == 0 {
			return nil
		}
		out := corev1.ResourceList{}
		for name, q := range in {
			if v, err := q.Parse(); err == nil {
				out[name] = v
			}
		}
		return out
	}
	return corev1.ResourceRequirements{Limits: list(r.Limits), Requests: list(r.Requests)}
}

// durationOr is d, or def when d is unset (or invalid: validateSpec reports that).
func durationOr(d *jwksv1alpha1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	if v, err := d.Parse(); err == nil {
		return v
	}
	return def
}

func policyOf(c *jwksv1alpha1.JWKSConfig) jwkset.Policy {
	return jwkset.Policy{
		KeepOldKeys: c.Spec.UpdateStrategy != jwksv1alpha1.UpdateStrategyImmediate && ptr.Deref(c.Spec.KeepOldKeys, true),
		OldKeysTTL:  durationOr(c.Spec.OldKeysTTL, defaultTTL),
		MaxKeys:     int(ptr.Deref(c.Spec.MaxKeys, defaultMaxKeys)),
	}
}

func cacheMaxAge(c *jwksv1alpha1.JWKSConfig) time.Duration {
	return durationOr(c.Spec.CacheMaxAge, defaultMaxAge)
}

func nginxEnabled(c *jwksv1alpha1.JWKSConfig) bool { return ptr.Deref(c.Spec.Nginx.Enabled, true) }

func labelsFor(c *jwksv1alpha1.JWKSConfig) map[string]string {
	return map[string]string{
		OwnerLabel:                     c.Name,
		"app.kubernetes.io/managed-by": "trustplane",
	}
}

func podLabels(c *jwksv1alpha1.JWKSConfig) map[string]string {
	return map[string]string{OwnerLabel: c.Name, "app.kubernetes.io/name": "jwks-nginx"}
}

func ownerRef(c *jwksv1alpha1.JWKSConfig) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(c, jwksv1alpha1.GroupVersion.WithKind("JWKSConfig"))}
}

// desiredJWKSConfigMap holds the set, and the discovery document when spec.issuer is
// set. It has no ownerReference: unless cleanupOnDelete, it outlives its JWKSConfig,
// because consumers (Envoy Gateway, ...) read it directly.
func desiredJWKSConfigMap(c *jwksv1alpha1.JWKSConfig, doc []byte, retirements string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: jwksConfigMapName(c), Namespace: c.Namespace, Labels: labelsFor(c),
			Annotations: map[string]string{RetirementsAnnotation: retirements},
		},
		Data: map[string]string{jwkset.DocumentKey: string(doc)},
	}
	if c.Spec.Issuer != "" && doc != nil {
		discovery, err := jwkset.Discovery(c.Spec.Issuer, doc)
		if err != nil {
			return nil, &jwkset.InputError{Reason: jwksv1alpha1.ReasonInvalidSpec, Message: "spec.issuer: " + err.Error()}
		}
		cm.Data[jwkset.DiscoveryKey] = string(discovery)
	}
	return cm, nil
}

func desiredNginxConfigMap(c *jwksv1alpha1.JWKSConfig) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: nginxConfigMapName(c), Namespace: c.Namespace, Labels: labelsFor(c), OwnerReferences: ownerRef(c),
		},
		Data: map[string]string{nginxConfigKey: jwkset.NginxServer(nginxPort, nginxHTMLDir, cacheMaxAge(c), c.Spec.Issuer != "")},
	}
}

// servedFiles are the keys of the JWKS ConfigMap that nginx serves as files.
func servedFiles(c *jwksv1alpha1.JWKSConfig) []corev1.KeyToPath {
	items := []corev1.KeyToPath{{Key: jwkset.DocumentKey, Path: jwkset.DocumentKey}}
	if c.Spec.Issuer != "" {
		items = append(items, corev1.KeyToPath{Key: jwkset.DiscoveryKey, Path: jwkset.DiscoveryKey})
	}
	return items
}

func desiredDeployment(c *jwksv1alpha1.JWKSConfig, image string) *appsv1.Deployment {
	n := c.Spec.Nginx
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Name, Namespace: c.Namespace, Labels: labelsFor(c), OwnerReferences: ownerRef(c),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(n.Replicas, defaultReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels(c)},
			// Never fewer serving pods than asked for while the config changes.
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      podLabels(c),
					Annotations: map[string]string{ConfigHashAnnotation: hashOf(desiredNginxConfigMap(c).Data)},
				},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](101),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:           "nginx",
						Image:          image,
						Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: nginxPort, Protocol: corev1.ProtocolTCP}},
						Resources:      containerResources(n.Resources),
						ReadinessProbe: probe,
						LivenessProbe:  probe,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/nginx/conf.d", ReadOnly: true},
							// The whole directory, not a subPath: subPath mounts never see updates.
							{Name: "jwks", MountPath: nginxHTMLDir, ReadOnly: true},
							{Name: "tmp", MountPath: "/tmp"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: nginxConfigMapName(c)}}}},
						{Name: "jwks", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: jwksConfigMapName(c)},
							Items:                servedFiles(c)}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

func desiredService(c *jwksv1alpha1.JWKSConfig) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Name, Namespace: c.Namespace, Labels: labelsFor(c), OwnerReferences: ownerRef(c),
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: podLabels(c),
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// Limits are the operator's bounds on what a JWKSConfig author may ask for: the
// manager runs nginx in her namespace with its own rights, and servers and caches keep
// the set for cacheMaxAge. Zero values are no bound.
type Limits struct {
	// MaxCacheMaxAge bounds spec.cacheMaxAge (--jwks-max-cache-max-age).
	MaxCacheMaxAge time.Duration
	// NginxMaxReplicas bounds spec.nginx.replicas (--jwks-nginx-max-replicas).
	NginxMaxReplicas int32
	// NginxMaxResources bounds each request and limit of the nginx container, by
	// resource name; a resource it does not name may not be asked for
	// (--jwks-nginx-max-resources).
	NginxMaxResources corev1.ResourceList
}

// check refuses a spec over the limits, naming each field and its limit.
func (l Limits) check(c *jwksv1alpha1.JWKSConfig) error {
	var problems []string
	if age := cacheMaxAge(c); l.MaxCacheMaxAge > 0 && age > l.MaxCacheMaxAge {
		problems = append(problems, fmt.Sprintf("spec.cacheMaxAge %v is over the operator's maximum %v (--jwks-max-cache-max-age)", age, l.MaxCacheMaxAge))
	}
	if n := ptr.Deref(c.Spec.Nginx.Replicas, defaultReplicas); l.NginxMaxReplicas > 0 && nginxEnabled(c) && n > l.NginxMaxReplicas {
		problems = append(problems, fmt.Sprintf("spec.nginx.replicas %d is over the operator's maximum %d (--jwks-nginx-max-replicas)", n, l.NginxMaxReplicas))
	}
	if l.NginxMaxResources != nil && nginxEnabled(c) {
		problems = append(problems, l.resourceProblems("limits", c.Spec.Nginx.Resources.Limits)...)
		problems = append(problems, l.resourceProblems("requests", c.Spec.Nginx.Resources.Requests)...)
	}
	if len(problems) > 0 {
		return &jwkset.InputError{Reason: jwksv1alpha1.ReasonOverLimit, Message: strings.Join(problems, "; ")}
	}
	return nil
}

func (l Limits) resourceProblems(field string, values map[corev1.ResourceName]jwksv1alpha1.Quantity) []string {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(values)) {
		q, err := values[name].Parse()
		if err != nil {
			continue // validateSpec reports it
		}
		limit, ok := l.NginxMaxResources[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("spec.nginx.resources.%s[%s]: the operator allows only %s (--jwks-nginx-max-resources)", field, name, resourceNames(l.NginxMaxResources)))
		case q.Cmp(limit) > 0:
			problems = append(problems, fmt.Sprintf("spec.nginx.resources.%s[%s] %s is over the operator's maximum %s (--jwks-nginx-max-resources)", field, name, q.String(), limit.String()))
		}
	}
	return problems
}

func resourceNames(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, string(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
