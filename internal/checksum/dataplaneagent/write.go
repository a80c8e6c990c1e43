package dataplaneagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/status"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// restore serves the on-disk snapshot before anything else: the gateway keeps working
// when the agent restarts while the API server is away. A corrupt snapshot is never served.
func (a *Agent) restore(ctx context.Context, logger interface {
	Info(string, ...any)
	Error(error, string, ...any)
}) {
	snap, err := a.store.Restore()
	switch {
	case err == nil:
		a.served, a.haveServed = snap, true
		servedSecrets.Set(float64(len(snap.Secrets)))
		logger.Info("restored the last verified set from disk", "checksum", snap.Checksum, "secrets", len(snap.Secrets))
		// The files are the ones nginx already serves or reads when it starts (a sidecar
		// starts before its gateway): a failed reload here changes nothing.
		if out, err := a.reload(ctx); err != nil {
			logger.Info("reload command failed after the restore; nginx reads the restored files when it starts", "error", err.Error(), "output", out)
		}
	case errors.Is(err, os.ErrNotExist):
		logger.Info("no verified set on disk yet")
	case errors.Is(err, dataplane.ErrCorruptSnapshot):
		snapshotCorrupt.Set(1)
		logger.Error(err, "the on-disk snapshot is corrupt and is not served; waiting for a verified set from the API server")
	default:
		logger.Error(err, "restoring the verified set")
	}
}

// serve writes a verified set and reloads the gateway. When the reload fails the gateway
// does not serve the new set: the previous files go back, so that a gateway started
// later reads a set that was served, and the error makes the work queue retry.
func (a *Agent) serve(ctx context.Context, snap dataplane.Snapshot, reason string, against client.Object) error {
	logger := log.FromContext(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.haveServed && a.served.Checksum == snap.Checksum && sameSecrets(a.served.Secrets, snap.Secrets) {
		// Back to what is served (a rotation undone): no new set waits for a reload.
		a.reloadFailing = false
		reloadFailing.Set(0)
		return nil
	}
	if err := a.store.Write(snap); err != nil {
		return fmt.Errorf("writing the verified set: %w", err)
	}
	if out, err := a.reload(ctx); err != nil {
		return a.rollBack(ctx, fmt.Errorf("reload command failed: %w; output: %s", err, out), snap.Checksum, against)
	}
	if a.reloadFailing {
		logger.Info("the reload command succeeded again")
	}
	a.reloadFailing = false
	reloadFailing.Set(0)
	a.served, a.haveServed = snap, true
	servedSecrets.Set(float64(len(snap.Secrets)))
	snapshotCorrupt.Set(0)
	logger.Info("serving a newly verified set", "checksum", snap.Checksum, "secrets", len(snap.Secrets), "reason", reason)
	if against != nil {
		a.recorder.Eventf(against, nil, corev1.EventTypeNormal, tenginev1alpha1.ReasonVerified, "Verify", "data plane serves %d secrets matching checksum %s", len(snap.Secrets), snap.Checksum)
	}
	return nil
}

// rollBack puts the previously served set back on disk (or, when none was served, leaves
// no set at all) after a failed reload, reports the failure once per failing period, and
// returns the error for the work queue to retry with backoff.
// The caller holds a.mu.
func (a *Agent) rollBack(ctx context.Context, reloadErr error, sum string, against client.Object) error {
	restore := a.store.Clear
	if a.haveServed {
		restore = func() error { return a.store.Write(a.served) }
	}
	restoreErr := restore()
	// Counted once the files are back: whoever watches the metric then sees the old set.
	reloadFailures.Inc()
	reloadFailing.Set(1)
	if !a.reloadFailing { // each retry's error is logged by controller-runtime
		log.FromContext(ctx).Info("reload failed: kept the previous verified set; retrying with backoff", "checksum", sum, "error", reloadErr.Error())
		if against != nil {
			a.recorder.Eventf(against, nil, corev1.EventTypeWarning, tenginev1alpha1.ReasonReloadFailed, "Reload",
				"data plane kept the previous verified set; the new one (checksum %s) waits for the reload to succeed: %s", sum, status.Truncate(reloadErr.Error(), 600))
		}
	}
	a.reloadFailing = true
	if restoreErr != nil {
		return fmt.Errorf("%w; putting the previous verified set back: %w", reloadErr, restoreErr)
	}
	return reloadErr
}

// reload runs the reload command, if any, and returns its output (truncated: a command's
// complaints, never key material, which the agent never passes to it).
func (a *Agent) reload(ctx context.Context) (string, error) {
	if a.opts.ReloadCommand == "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := strings.Fields(a.opts.ReloadCommand)
	// The operator's own --reload-command, split on spaces and run without a shell.
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput() //nolint:gosec // see above
	return status.Truncate(strings.TrimSpace(string(out)), 500), err
}

// sameSecrets says whether two sets would write the same files. The ID covers only the
// leaf certificate, so the chain behind it, the key and the CA files are compared too.
func sameSecrets(a, b []dataplane.Secret) bool {
	return slices.EqualFunc(a, b, func(x, y dataplane.Secret) bool {
		return x.Namespace == y.Namespace && x.Name == y.Name && x.ID == y.ID && bytes.Equal(x.Crt, y.Crt) &&
			bytes.Equal(x.Key, y.Key) && bytes.Equal(x.CA, y.CA) && bytes.Equal(x.CRL, y.CRL)
	})
}
