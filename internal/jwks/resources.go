package jwks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

// The desired objects of a JWKSConfig, pure functions of its spec: the phases build what
// they write here, at their leaf.

const (
	nginxPort      = 8080
	nginxHTMLDir   = "/usr/share/nginx/html"
	nginxConfigKey = "default.conf"
	// defaultReplicas is spec.nginx.replicas's default (the CRD's too).
	defaultReplicas int32 = 2
)

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

func labelsFor(c *jwksv1alpha1.JWKSConfig) map[string]string {
	return map[string]string{
		jwksv1alpha1.OwnerLabel:        c.Name,
		"app.kubernetes.io/managed-by": "trustplane",
	}
}

func podLabels(c *jwksv1alpha1.JWKSConfig) map[string]string {
	return map[string]string{jwksv1alpha1.OwnerLabel: c.Name, "app.kubernetes.io/name": "jwks-nginx"}
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
			Name: jwkset.ConfigMapName(c), Namespace: c.Namespace, Labels: labelsFor(c),
			Annotations: map[string]string{jwksv1alpha1.RetirementsAnnotation: retirements},
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
			Name: jwkset.NginxConfigMapName(c), Namespace: c.Namespace, Labels: labelsFor(c), OwnerReferences: ownerRef(c),
		},
		Data: map[string]string{nginxConfigKey: jwkset.NginxServer(nginxPort, nginxHTMLDir, jwkset.CacheMaxAge(c), c.Spec.Issuer != "")},
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
					Annotations: map[string]string{jwksv1alpha1.ConfigHashAnnotation: hashOf(desiredNginxConfigMap(c).Data)},
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
							LocalObjectReference: corev1.LocalObjectReference{Name: jwkset.NginxConfigMapName(c)}}}},
						{Name: "jwks", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: jwkset.ConfigMapName(c)},
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

// desiredNginx are the objects that run nginx for a JWKSConfig, in the order they are
// applied: its ConfigMap, Deployment and Service.
func desiredNginx(c *jwksv1alpha1.JWKSConfig, image string) []client.Object {
	return []client.Object{desiredNginxConfigMap(c), desiredDeployment(c, image), desiredService(c)}
}

// nginxObjects names the objects desiredNginx makes, and nothing more: what a JWKSConfig
// with nginx off looks up to delete, without rendering nginx's configuration and pod
// template on every reconcile (a tenth of the manager's reconcile CPU in make bench-jwks
// at 10,000 sets).
func nginxObjects(c *jwksv1alpha1.JWKSConfig) []client.Object {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: c.Namespace, Name: name} }
	return []client.Object{
		&corev1.ConfigMap{ObjectMeta: meta(jwkset.NginxConfigMapName(c))},
		&appsv1.Deployment{ObjectMeta: meta(c.Name)},
		&corev1.Service{ObjectMeta: meta(c.Name)},
	}
}

// deletedObjects are the objects deleting a JWKSConfig removes, in the order they are
// deleted: nginx's Deployment, Service and ConfigMap, and, with cleanupOnDelete, the set.
func deletedObjects(c *jwksv1alpha1.JWKSConfig, image string) []client.Object {
	objs := []client.Object{desiredDeployment(c, image), desiredService(c), desiredNginxConfigMap(c)}
	if c.Spec.CleanupOnDelete {
		set, _ := desiredJWKSConfigMap(c, nil, "") // no document: cannot fail
		objs = append(objs, set)
	}
	return objs
}

// hashOf is a short, stable hash of v's JSON.
func hashOf(v any) string {
	raw, _ := json.Marshal(v) // maps marshal with sorted keys: stable
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}
