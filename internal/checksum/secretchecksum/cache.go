package secretchecksum

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/handlers"
	"github.com/trustplane/trustplane/internal/manager"
)

// inputs turns Secrets into what the formula needs before they reach the cache.
//
// Tengine-Ingress keeps a Secret only if its tls.crt and tls.key load as a pair (or it is
// a CA-only Secret), so deciding needs the private key. The key must not stay in the
// manager's memory, so the cache transform decides there and then — it computes the
// PemSHA, or why the Secret is left out — and the cached copy keeps no data at all. The
// outcome is kept per Secret together with a hash of the data it came from, so an update
// that leaves the data alone (a label, a new version) parses nothing.
type inputs struct {
	versionAnnotation string
	metrics           *Metrics

	mu       sync.Mutex
	outcomes map[types.UID]pemOutcome
}

// pemOutcome is SecretPemSHA's result for one Secret's data.
type pemOutcome struct {
	// resourceVersion the outcome was computed at: the informer may hand an object it
	// already transformed (its data gone) to the transform again.
	resourceVersion string
	dataHash        [sha256.Size]byte // of the keys Tengine reads; a hash, so no key material is kept
	pemSHA          string
	err             error // a *checksum.LeftOut
}

func newInputs(versionAnnotation string, m *Metrics) *inputs {
	return &inputs{versionAnnotation: versionAnnotation, metrics: m, outcomes: map[types.UID]pemOutcome{}}
}

// cache is the controller's own cache: Secrets and Ingresses in the covered namespaces,
// and the checksum objects it published there (the publish namespace is one of them).
func (in *inputs) cache(mgr ctrl.Manager, namespaces []string) (cache.Cache, error) {
	ours := labels.SelectorFromSet(labels.Set{ManagedByLabel: managedByValue})
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: byNamespace(namespaces),
		NewInformer:       manager.StripListPages(in.strip, manager.ListPageBytes),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:             {Transform: in.stripSecret},
			&networkingv1.Ingress{}:      {Transform: in.stripIngress},
			&networkingv1.IngressClass{}: {Transform: stripIngressClass},
			&tenginev1.SecretCheckSum{}:  {Label: ours},
			&tenginev1.IngressCheckSum{}: {Label: ours},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the input cache: %w", err)
	}
	return c, manager.AddCache(mgr, c)
}

func byNamespace(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	out := map[string]cache.Config{}
	for _, ns := range namespaces {
		out[ns] = cache.Config{}
	}
	return out
}

// strip is the transform of every object in the cache: Secrets, Ingresses and
// IngressClasses are stripped, the checksum objects (ours only, by label) are kept.
func (in *inputs) strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		return in.stripIngress(o)
	case *networkingv1.IngressClass:
		return stripIngressClass(o)
	}
	return in.stripSecret(obj)
}

// versioned says whether the Secret carries the version annotation.
func (in *inputs) versioned(s *corev1.Secret) bool {
	_, ok := s.Annotations[in.versionAnnotation]
	return ok
}

// stripSecret records the Secret's PemSHA outcome and keeps of the Secret only what the
// checksum and its reports read: name, namespace, UID, resource version and the version
// annotation (canonical, see versionOnly). Everything else a tenant controls goes: the
// data, the other annotations (kubectl's last-applied-configuration holds the whole
// Secret, key included), labels (a Secret may carry a megabyte of them), owner references,
// finalizers and managed fields. So what the cache retains per Secret is bounded, whatever
// the Secret's size. A Secret without the version annotation is not parsed:
// Tengine-Ingress does not count it, whatever it holds.
func (in *inputs) stripSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	if in.versioned(s) {
		in.evaluate(s)
	} else {
		in.forget(s.UID)
	}
	s.ObjectMeta = metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		CreationTimestamp: s.CreationTimestamp, DeletionTimestamp: s.DeletionTimestamp,
		Annotations: versionOnly(s.Annotations, in.versionAnnotation),
	}
	s.Data, s.StringData, s.Type = nil, nil, ""
	return s, nil
}

// evaluate computes the Secret's PemSHA unless its data is what it was last time.
func (in *inputs) evaluate(s *corev1.Secret) {
	in.mu.Lock()
	defer in.mu.Unlock()
	prev, ok := in.outcomes[s.UID]
	if ok && prev.resourceVersion == s.ResourceVersion {
		return
	}
	hash := dataHash(s.Data)
	if ok && prev.dataHash == hash {
		prev.resourceVersion = s.ResourceVersion
		in.outcomes[s.UID] = prev
		return
	}
	in.metrics.parsed.Inc()
	sha, err := checksum.SecretPemSHA(s.Data)
	in.outcomes[s.UID] = pemOutcome{resourceVersion: s.ResourceVersion, dataHash: hash, pemSHA: sha, err: err}
}

func (in *inputs) forget(uid types.UID) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.outcomes, uid)
}

// secretID is the Secret's ID, from its cached (stripped) copy and its recorded outcome.
func (in *inputs) secretID(s *corev1.Secret) (string, error) {
	in.mu.Lock()
	outcome, ok := in.outcomes[s.UID]
	in.mu.Unlock()
	if !ok {
		// Unversioned: the version check says so, before any data would be read.
		return checksum.SecretIDWithPemSHA(s.Name, s.Annotations, in.versionAnnotation, "")
	}
	id, err := checksum.SecretIDWithPemSHA(s.Name, s.Annotations, in.versionAnnotation, outcome.pemSHA)
	if err == nil && outcome.err != nil {
		return "", outcome.err // name and version are fine, the data is not
	}
	return id, err
}

// dataHash covers exactly the keys Tengine-Ingress reads, each length-prefixed.
func dataHash(data map[string][]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, key := range checksum.SecretKeys {
		value, present := data[key]
		var prefix [9]byte
		if present {
			prefix[0] = 1
		}
		binary.BigEndian.PutUint64(prefix[1:], uint64(len(value)))
		h.Write(prefix[:])
		h.Write(value)
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

// stripIngress keeps what the formula and Tengine-Ingress's class rules read: the name,
// the version annotation, the class annotation and spec.ingressClassName.
func (in *inputs) stripIngress(obj any) (any, error) {
	if ing, ok := obj.(*networkingv1.Ingress); ok {
		annotations := versionOnly(ing.Annotations, in.versionAnnotation)
		if class, ok := ing.Annotations[checksum.IngressClassAnnotation]; ok {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[checksum.IngressClassAnnotation] = boundedClass(class)
		}
		ing.ObjectMeta = metav1.ObjectMeta{
			Name: ing.Name, Namespace: ing.Namespace, UID: ing.UID, ResourceVersion: ing.ResourceVersion,
			CreationTimestamp: ing.CreationTimestamp, DeletionTimestamp: ing.DeletionTimestamp,
			Annotations: annotations,
		}
		ing.Spec = networkingv1.IngressSpec{IngressClassName: ing.Spec.IngressClassName}
		ing.Status = networkingv1.IngressStatus{}
	}
	return obj, nil
}

// maxKeptClassBytes bounds the class annotation kept in the cache: as long as the longest
// IngressClass name (a DNS subdomain), so that every value a class could have is kept
// whole, while a tenant's 256 KiB annotation is cut (and then equals no class).
const maxKeptClassBytes = 253

func boundedClass(class string) string {
	if len(class) <= maxKeptClassBytes {
		return class
	}
	return strings.ToValidUTF8(class[:maxKeptVersionBytes], "") + "…"
}

// stripIngressClass keeps an IngressClass's name and spec.controller: all Tengine-Ingress's
// class rules read of it.
func stripIngressClass(obj any) (any, error) {
	if class, ok := obj.(*networkingv1.IngressClass); ok {
		class.ObjectMeta = metav1.ObjectMeta{
			Name: class.Name, UID: class.UID, ResourceVersion: class.ResourceVersion,
			CreationTimestamp: class.CreationTimestamp, DeletionTimestamp: class.DeletionTimestamp,
		}
		class.Spec = networkingv1.IngressClassSpec{Controller: class.Spec.Controller}
	}
	return obj, nil
}

// maxKeptVersionBytes bounds the version annotation kept in the cache. An integer
// version is kept canonical (strconv.Itoa, at most 20 bytes: the ID prints it so
// anyway); anything else is not a version and only its beginning is kept, for the
// left-out message. A tenant's 256 KiB annotation therefore costs the cache 64 bytes.
const maxKeptVersionBytes = 64

// versionOnly is the version annotation alone, bounded, with the outcome
// checksum.Version gives the original: the same ID, or the same reason to leave it out.
func versionOnly(annotations map[string]string, key string) map[string]string {
	v, ok := annotations[key]
	if !ok {
		return nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		v = strconv.Itoa(n)
	} else if len(v) > maxKeptVersionBytes {
		v = strings.ToValidUTF8(v[:maxKeptVersionBytes], "") + "…" // never an integer
	}
	return map[string]string{key: v}
}

// The transform functions' signature, checked at compile time.
var _ toolscache.TransformFunc = (&inputs{}).stripSecret

func kindSource[T client.Object](c cache.Cache, obj T, fn func(old, cur T, q handlers.Queue)) source.Source {
	return source.Kind(c, obj, handlers.OldNew(fn))
}

func isNil(obj any) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
