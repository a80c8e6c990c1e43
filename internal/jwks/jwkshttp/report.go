package jwkshttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// What a JWKS server reports of what it serves, so that a key is copied to a JWKSConfig's
// signing Secret only once every server answers a set holding it (internal/jwks,
// signing.go). Every server holds a Lease of its own in the manager's namespace
// (--jwks-issuer-claim-namespace), labelled jwksv1alpha1.ServerLabel, from before it
// accepts a connection until it stops, renewed every ReportInterval; its annotation
// jwksv1alpha1.ServingAnnotation names, for each JWKSConfig whose status has a key
// waiting to sign (status.pendingKeyID), that key, once this server answers a set
// holding it, and since when. The controller reads the servers' own word, not its own
// cache: a server's watch may lag the controller's by far more than the promotion
// margin (client-go backs a failing watch off up to a minute after an API server
// restart), or be cut off altogether, while the server still answers its last sets.
//
// A server that cannot renew its Lease answers 503 from ReportInterval before the Lease
// runs out (relying parties keep what they cached), and exits: once a server's Lease has
// run out, the controller no longer waits for it, so it must answer nothing it may not
// have read. Started again, it reads everything afresh before it reports and answers.
const (
	// ReportInterval is how often a server renews its Lease and report.
	ReportInterval = 2 * time.Second
	// ReportDuration is how long a report holds: the Lease's duration. Long enough to ride
	// out a kube-apiserver restart (a server stops answering once its report runs out),
	// short against the promotion margin and cacheMaxAge: a server that stopped without
	// deleting its Lease holds a promotion up for at most this long.
	ReportDuration = 30 * time.Second
)

// ServedKey is a key a server answers in a JWKSConfig's set, and since when (in this
// process).
type ServedKey struct {
	KeyID string    `json:"kid"`
	Since time.Time `json:"since"`
}

// Report is what one server answers of the keys waiting to sign, by JWKSConfig
// ("<namespace>/<name>").
type Report map[string]ServedKey

// ServerReport is one server's Lease as the controller reads it.
type ServerReport struct {
	// Name is the Lease's name; Holder says which process holds it (host and address).
	Name, Holder string
	// Until is when the report runs out (renewTime + leaseDurationSeconds): the server
	// answers nothing from then on (from ReportInterval before, by its own clock).
	Until time.Time
	// Serving is the report; a report that does not parse names no key.
	Serving Report
}

// ReportOf reads a server's Lease.
func ReportOf(lease *coordinationv1.Lease) ServerReport {
	r := ServerReport{Name: lease.Name, Holder: ptr.Deref(lease.Spec.HolderIdentity, "")}
	if lease.Spec.RenewTime != nil {
		r.Until = lease.Spec.RenewTime.Add(time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second)
	}
	_ = json.Unmarshal([]byte(lease.Annotations[jwksv1alpha1.ServingAnnotation]), &r.Serving)
	return r
}

// reporter is the server's side of the reports (Server.Reports set).
type reporter struct {
	name, holder string
	// lease is the Lease as last written (nil before the first write, or after a
	// conflict: read again).
	lease *coordinationv1.Lease
	// failing: the last write failed (its first failure is logged, and the next success).
	failing bool
}

// ReportIdentity is the Lease name and holder of a server listening on addr on this host:
// the same for a process started again in its place (a container restarted in its pod),
// so the new process takes its Lease over at once; another for every other server.
func ReportIdentity(addr string) (name, holder string) {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	holder = host + " " + addr
	sum := sha256.Sum256([]byte(holder))
	return "trustplane-jwks-server-" + hex.EncodeToString(sum[:8]), holder
}

// answering says whether the last report still holds, by this process's clock: from
// ReportInterval before it runs out, the server answers 503, since the controller stops
// waiting for it once it has run out. Without reports (tests), always.
func (s *Server) answering() bool {
	if s.Reports == nil {
		return true
	}
	until := s.answerUntil.Load()
	return until != 0 && time.Now().UnixNano() < until
}

// register writes the server's first report, retrying until it goes through: the server
// answers nothing before.
func (s *Server) register(ctx context.Context) error {
	s.reports.name, s.reports.holder = ReportIdentity(s.Addr)
	s.opened = time.Now()
	for {
		err := s.report(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(ReportInterval):
		}
	}
}

// keepReporting renews the report every ReportInterval (and soon after a route with a
// key waiting to sign changes) until ctx ends, then deletes the Lease: a server that
// stops answers nothing more. It returns an error once the report has run out.
func (s *Server) keepReporting(ctx context.Context) error {
	tick := time.NewTicker(ReportInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.unregister(ctx)
			return nil
		case <-tick.C:
		case <-s.reportSoon:
		}
		_ = s.report(ctx)
		if !s.answering() {
			return fmt.Errorf("the JWKS server could not report what it serves to the API server for %v: it stopped answering before its report (Lease %s/%s) ran out, as the controller no longer waits for it then, and exits to read everything afresh when started again",
				ReportDuration-ReportInterval, s.ReportNamespace, s.reports.name)
		}
	}
}

// report writes the server's Lease: renewed now, with what it serves of the keys waiting
// to sign. On success the server may answer until ReportInterval before it runs out.
func (s *Server) report(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ReportInterval)
	defer cancel()
	renewed := time.Now()
	body, err := json.Marshal(s.routes().served(s.opened))
	if err != nil {
		return err
	}
	r := &s.reports
	lease := r.lease
	if lease == nil {
		lease = &coordinationv1.Lease{}
		err := s.Reports.Get(ctx, types.NamespacedName{Namespace: s.ReportNamespace, Name: r.name}, lease)
		switch {
		case apierrors.IsNotFound(err):
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.ReportNamespace, Name: r.name}}
		case err != nil:
			return s.reportFailed(ctx, err)
		}
	}
	lease = lease.DeepCopy()
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Labels[jwksv1alpha1.ServerLabel] = r.name
	lease.Annotations[jwksv1alpha1.ServingAnnotation] = string(body)
	lease.Spec.HolderIdentity = ptr.To(r.holder)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(ReportDuration / time.Second))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	if lease.ResourceVersion == "" {
		lease.Spec.AcquireTime = lease.Spec.RenewTime
		err = s.Reports.Create(ctx, lease)
	} else {
		err = s.Reports.Update(ctx, lease)
	}
	if err != nil {
		r.lease = nil // read it again next time (a conflict, or deleted meanwhile)
		return s.reportFailed(ctx, err)
	}
	r.lease = lease
	s.answerUntil.Store(renewed.Add(ReportDuration - ReportInterval).UnixNano())
	if r.failing {
		r.failing = false
		log.FromContext(ctx).Info("the JWKS server reports to the API server again", "lease", r.name)
	}
	return nil
}

func (s *Server) reportFailed(ctx context.Context, err error) error {
	if !s.reports.failing {
		s.reports.failing = true
		log.FromContext(ctx).Error(err, "the JWKS server cannot report what it serves; it stops answering if this lasts", "lease", s.reports.name,
			"answersUntil", time.Unix(0, s.answerUntil.Load()).UTC())
	}
	return err
}

// unregister deletes the server's Lease as it stops: the controller need not wait for
// its report to run out.
func (s *Server) unregister(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.ReportNamespace, Name: s.reports.name}}
	var opts []client.DeleteOption
	if s.reports.lease != nil {
		opts = append(opts, client.Preconditions{UID: &s.reports.lease.UID})
	}
	if err := s.Reports.Delete(ctx, lease, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.FromContext(ctx).Error(err, "deleting the JWKS server's Lease; it runs out by itself", "lease", s.reports.name)
	}
}
