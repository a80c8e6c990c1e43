package dataplaneagent

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// The ID covers only the leaf: a new intermediate behind the same leaf must still be
// written, and so must a new key.
func TestSameSecretsSeesChainAndKeyChanges(t *testing.T) {
	served := []dataplane.Secret{{Name: "site", ID: "1-1-abc", Crt: []byte("leaf+intermediate-1"), Key: []byte("key")}}
	if !sameSecrets(served, []dataplane.Secret{served[0]}) {
		t.Error("an identical set counts as changed")
	}
	for what, s := range map[string]dataplane.Secret{
		"chain": {Name: "site", ID: "1-1-abc", Crt: []byte("leaf+intermediate-2"), Key: []byte("key")},
		"key":   {Name: "site", ID: "1-1-abc", Crt: []byte("leaf+intermediate-1"), Key: []byte("key-2")},
	} {
		if sameSecrets(served, []dataplane.Secret{s}) {
			t.Errorf("a changed %s counts as the same set", what)
		}
	}
}

// What the API server may store under a loose CRD (Tengine-Ingress's own has no pattern)
// and Go cannot decode must be an error per object, not a panic or a silent zero.
func TestDecodeSpec(t *testing.T) {
	for _, tc := range []struct {
		timestamp string
		ok        bool
	}{
		{"2024-01-02T03:04:05Z", true},
		{"2024-01-02T03:04:05+02:00", true},
		{"2024-01-02T03:04:05", false},
		{"2024-01-02t03:04:05z", false},
	} {
		for _, kind := range []string{checksum.KindSecretCheckSum, checksum.KindIngressCheckSum} {
			u := checksumObject(kind)
			u.Object["spec"] = map[string]any{"checksum": "abc", "ids": []any{"1-1-x"}, "timestamp": tc.timestamp}
			sum, ids, err := decodeSpec(kind, u)
			if tc.ok != (err == nil) {
				t.Errorf("%s %s: err %v", kind, tc.timestamp, err)
			}
			if tc.ok && (sum != "abc" || strings.Join(ids, ",") != "1-1-x") {
				t.Errorf("%s %s: decoded %q %v", kind, tc.timestamp, sum, ids)
			}
		}
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		opts    Options
		err     string
		watched string
	}{
		{opts: Options{Dir: "d"}, watched: ""},
		{opts: Options{Dir: "d", Namespace: "edge"}, watched: "edge"},
		{opts: Options{Dir: "d", Namespaces: []string{"b", "a", "", "b"}}, watched: "a,b"},
		{opts: Options{Dir: "d", Namespace: "edge", Namespaces: []string{"a"}}, err: "--namespace and --namespaces are mutually exclusive"},
		{opts: Options{Namespace: "edge"}, err: "--dir is required"},
	} {
		err := tc.opts.Validate()
		if fmt.Sprint(err) != fmt.Sprint(errOrNil(tc.err)) {
			t.Errorf("%+v: Validate = %v, want %q", tc.opts, err, tc.err)
		}
		if got := strings.Join(tc.opts.WatchedNamespaces(), ","); tc.err == "" && got != tc.watched {
			t.Errorf("%+v: watched %q, want %q", tc.opts, got, tc.watched)
		}
	}
}

func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// The cache keeps only what a verified set can hold.
func TestStripSecret(t *testing.T) {
	strip := stripObject(checksum.DefaultVersionAnnotation)
	versioned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		checksum.DefaultVersionAnnotation: "1", corev1.LastAppliedConfigAnnotation: `{"data":{"tls.key":"..."}}`}},
		Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k"), "ca.crt": []byte("a"), "ca.crl": []byte("l"), "password": []byte("p")}}
	out, err := strip(versioned)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if len(s.Data) != 4 || s.Data["password"] != nil || s.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
		t.Errorf("versioned Secret kept %v, annotations %v", s.Data, s.Annotations)
	}
	token := &corev1.Secret{Data: map[string][]byte{"token": []byte("t"), "tls.crt": []byte("c")}}
	if out, _ := strip(token); out.(*corev1.Secret).Data != nil {
		t.Error("an unversioned Secret kept its data")
	}
}

// localSet writes what Tengine-Ingress loads: pairs, CA-only Secrets, and namespaced
// file names when the agent follows more than one namespace.
func TestLocalSet(t *testing.T) {
	key, _ := testcerts.NewKey(testcerts.P256)
	chain, err := testcerts.NewChain(key, "x.example.com", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]string{checksum.DefaultVersionAnnotation: "1"}
	items := []corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "site-1", Annotations: v}, Data: map[string][]byte{"tls.crt": chain.PEM(), "tls.key": chain.KeyPEM(), "ca.crt": chain.PEM()}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "ca-2", Annotations: v}, Data: map[string][]byte{"ca.crt": chain.PEM(), "tls.crt": chain.PEM()}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unversioned-3"}, Data: map[string][]byte{"tls.crt": chain.PEM(), "tls.key": chain.KeyPEM()}},
	}
	for perNS, want := range map[bool]string{false: "ca-2:2-1-::ca site-1:1-1-:crt,key:ca", true: "a.ca-2:2-1-::ca b.site-1:1-1-:crt,key:ca"} {
		var got []string
		for _, s := range (&Agent{opts: DefaultOptions(), perNS: perNS}).localSet(items) {
			var parts []string
			if s.Crt != nil {
				parts = append(parts, "crt")
			}
			if s.Key != nil {
				parts = append(parts, "key")
			}
			ca := ""
			if s.CA != nil {
				ca = "ca"
			}
			got = append(got, fmt.Sprintf("%s:%s:%s:%s", s.Base(), strings.TrimSuffix(s.ID, s.ID[strings.LastIndex(s.ID, "-")+1:]), strings.Join(parts, ","), ca))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("perNS=%v: %s, want %s", perNS, strings.Join(got, " "), want)
		}
	}
}

// A distrust is worded by what is known: a diff, no IDs to diff against, or another scope.
func TestDescribe(t *testing.T) {
	a := &Agent{scope: dataplane.ScopeOf([]string{"web"}, checksum.DefaultVersionAnnotation)}
	big := checksumObject(checksum.KindSecretCheckSum)
	big.SetAnnotations(map[string]string{dataplane.IDsOmittedAnnotation: "30000 IDs, limit 26000"})
	all := dataplane.ScopeOf(nil, checksum.DefaultVersionAnnotation)
	for _, tc := range []struct {
		v              dataplane.Verdict
		reason         string
		want, wantNot  []string
		sameKeyAsAfter *dataplane.Verdict
	}{
		{v: dataplane.Verdict{Reason: dataplane.Mismatch, Checksum: "c", Against: "web/s1", LocalOnly: []string{"1-1-a"}, PublishedOnly: []string{"2-1-b"}},
			reason: "ChecksumMismatch", want: []string{"only local: [1-1-a]", "only in web/s1: [2-1-b]"}},
		{v: dataplane.Verdict{Reason: dataplane.Mismatch, Checksum: "c", Against: "web/big", IDsOmitted: true},
			reason: "ChecksumMismatch", want: []string{"web/big did not publish its IDs (30000 IDs, limit 26000)"}, wantNot: []string{"only local"}},
		{v: dataplane.Verdict{Reason: dataplane.ScopeMismatch, Checksum: "c", Against: "ops/s1", AgainstScope: all},
			reason: dataplane.ScopeMismatch, want: []string{a.scope, all, "ops/s1"}, wantNot: []string{"only local"},
			sameKeyAsAfter: &dataplane.Verdict{Reason: dataplane.ScopeMismatch, Checksum: "d", Against: "ops/s2", AgainstScope: all}},
	} {
		key, reason, note := a.describe(checksum.TrackSecrets, tc.v, big)
		if reason != tc.reason {
			t.Errorf("%s: reason %s, want %s", tc.v.Reason, reason, tc.reason)
		}
		for _, w := range tc.want {
			if !strings.Contains(note, w) {
				t.Errorf("%s: note %q lacks %q", tc.v.Reason, note, w)
			}
		}
		for _, w := range tc.wantNot {
			if strings.Contains(note, w) {
				t.Errorf("%s: note %q has %q", tc.v.Reason, note, w)
			}
		}
		// A scope mismatch is reported once, not again for each new publication.
		if tc.sameKeyAsAfter != nil {
			if again, _, _ := a.describe(checksum.TrackSecrets, *tc.sameKeyAsAfter, big); again != key {
				t.Errorf("a new publication of the same other scope is reported again: %q vs %q", again, key)
			}
		}
	}
}
