package jwtsigner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
)

// Source follows one JWKSConfig, its published set and its signing key through a
// controller-runtime cache of the JWKSConfig's namespace, and builds a new snapshot at
// every change it watches.
type Source struct {
	key      types.NamespacedName
	stateDir string
	log      logr.Logger

	cache   cache.Cache
	changed chan struct{}
	ready   chan struct{} // closed once there is a snapshot to serve
	current atomic.Pointer[Snapshot]
	// live is set once a snapshot was read from the cluster: from then on the state dir
	// is only written.
	live bool
}

// NewSource builds the source of key's snapshots; initial (from the state dir, may be
// nil) is served until the cluster's view is complete.
func NewSource(cfg *rest.Config, key types.NamespacedName, stateDir string, initial *Snapshot, log logr.Logger) (*Source, error) {
	// A fixed mapping of the three kinds: the cache needs no discovery, so the signer
	// starts (and serves its state) while the API server does not answer.
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{
		jwksv1alpha1.GroupVersion.WithKind("JWKSConfig"), corev1.SchemeGroupVersion.WithKind("ConfigMap"), corev1.SchemeGroupVersion.WithKind("Secret"),
	} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme.New(),
		Mapper:            mapper,
		DefaultNamespaces: map[string]cache.Config{key.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&jwksv1alpha1.JWKSConfig{}: {Field: fields.OneTermEqualSelector("metadata.name", key.Name)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache of namespace %s: %w", key.Namespace, err)
	}
	s := &Source{key: key, stateDir: stateDir, log: log, cache: c, changed: make(chan struct{}, 1), ready: make(chan struct{})}
	if initial != nil {
		s.current.Store(initial)
		close(s.ready)
	}
	return s, nil
}

// Current is the snapshot to serve now, nil before there is one.
func (s *Source) Current() *Snapshot { return s.current.Load() }

// Ready is closed once there is a snapshot to serve.
func (s *Source) Ready() <-chan struct{} { return s.ready }

// Run watches until ctx ends. It returns an error (and the process stops) only when the
// first snapshot read from the cluster holds a key kube-apiserver cannot use.
func (s *Source) Run(ctx context.Context) error {
	notify := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	for _, obj := range []client.Object{&jwksv1alpha1.JWKSConfig{}, &corev1.ConfigMap{}, &corev1.Secret{}} {
		inf, err := s.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching %T in namespace %s: %w", obj, s.key.Namespace, err)
		}
		if _, err := inf.AddEventHandler(notify); err != nil {
			return err
		}
	}
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- s.cache.Start(ctx) }()
	if !s.cache.WaitForCacheSync(ctx) {
		return <-cacheDone
	}
	s.log.Info("watching", "jwksconfig", s.key.String())
	s.poke()
	for {
		select {
		case <-ctx.Done():
			return <-cacheDone
		case err := <-cacheDone:
			return err
		case <-s.changed:
			if err := s.refresh(ctx); err != nil {
				return err
			}
		}
	}
}

func (s *Source) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// refresh reads the cluster's view and serves it, once it is complete.
func (s *Source) refresh(ctx context.Context) error {
	in, complete := s.read(ctx)
	if !complete && !s.live {
		s.log.Info("the cluster's view is not complete yet; serving the state dir's keys meanwhile", "from", fromOf(s.Current()), "problem", problem(in))
		return nil
	}
	snap := Build(in)
	if !s.live {
		if err := snap.Unusable(); err != nil {
			return fmt.Errorf("JWKSConfig %s: %w", s.key, err)
		}
		s.live = true
	}
	prev := s.current.Swap(snap)
	if prev == nil {
		close(s.ready)
	}
	if prev == nil || prev.KeyID != snap.KeyID || !slices.Equal(keyIDs(prev), keyIDs(snap)) || errText(prev.SignErr) != errText(snap.SignErr) || errText(prev.KeysErr) != errText(snap.KeysErr) {
		s.log.Info("serving", "from", snap.From, "signingKid", snap.KeyID, "alg", snap.Algorithm, "kids", keyIDs(snap),
			"refreshHint", snap.RefreshHint.String(), "signError", errText(snap.SignErr), "keysError", errText(snap.KeysErr))
	}
	if s.stateDir != "" && snap.Serves() {
		if err := SaveState(s.stateDir, s.key.String(), snap); err != nil {
			s.log.Error(err, "keeping the state")
		}
	}
	return nil
}

// read is the cluster's view of the JWKSConfig; complete when the JWKSConfig, its
// published set and its signing key are all there.
func (s *Source) read(ctx context.Context) (Input, bool) {
	in := Input{From: "JWKSConfig " + s.key.String()}
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := s.cache.Get(ctx, s.key, cfg); err != nil {
		in.SetErr = notFound(err, "JWKSConfig "+s.key.String())
		in.SigningKeyErr = in.SetErr
		return in, false
	}
	in.RefreshHint = jwkset.CacheMaxAge(cfg)
	cm := &corev1.ConfigMap{}
	cmKey := types.NamespacedName{Namespace: s.key.Namespace, Name: jwkset.ConfigMapName(cfg)}
	if err := s.cache.Get(ctx, cmKey, cm); err != nil {
		in.SetErr = notFound(err, "the published set's ConfigMap "+cmKey.String())
	} else if set, ok := cm.Data[jwkset.DocumentKey]; !ok || set == "" {
		in.SetErr = fmt.Errorf("ConfigMap %s has no %s: nothing is published yet", cmKey, jwkset.DocumentKey)
	} else {
		in.Set = []byte(set)
		in.DataTimestamp = cm.CreationTimestamp.Time
		if cfg.Status.LastUpdateTime != nil {
			in.DataTimestamp = cfg.Status.LastUpdateTime.Time
		}
	}
	secretName := cfg.Spec.CertificateSecret
	if cfg.Spec.SigningSecret != "" {
		secretName = cfg.Spec.SigningSecret
	}
	secretKey := types.NamespacedName{Namespace: s.key.Namespace, Name: secretName}
	secret := &corev1.Secret{}
	if err := s.cache.Get(ctx, secretKey, secret); err != nil {
		in.SigningKeyErr = notFound(err, "the signing key's Secret "+secretKey.String())
	} else if key := secret.Data[corev1.TLSPrivateKeyKey]; len(key) == 0 {
		in.SigningKeyErr = fmt.Errorf("secret %s has no %s", secretKey, corev1.TLSPrivateKeyKey)
	} else {
		in.SigningKey = key
	}
	return in, in.SetErr == nil && in.SigningKeyErr == nil
}

func notFound(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s is not found", what)
	}
	return fmt.Errorf("reading %s: %w", what, err)
}

func problem(in Input) string {
	return errText(errors.Join(in.SetErr, in.SigningKeyErr))
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func fromOf(s *Snapshot) string {
	if s == nil {
		return "nothing"
	}
	return s.From
}
