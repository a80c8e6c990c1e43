package usercli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
)

func newJWKSCommand() *cobra.Command {
	return day2Group("jwks", "JWK Sets: what trustplane publishes for a certificate, and whether a token verifies", newJWKSInspectCommand(), newJWKSVerifyCommand())
}

// readInput reads a file, or stdin for "-".
func readInput(cmd *cobra.Command, name string, limit int64) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, oneLine(err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return data, nil
}

func newJWKSInspectCommand() *cobra.Command {
	var algorithm string
	cmd := &cobra.Command{
		Use:   "inspect FILE|-",
		Short: "Print the JWK Set trustplane would publish for a PEM certificate chain (offline)",
		Long: `Print the JWK Set a JWKSConfig would publish for a PEM certificate chain (leaf first,
as in a kubernetes.io/tls Secret's tls.crt), kid included: the RFC 7638 thumbprint that
stays the same when the certificate is renewed for the same key. Other PEM blocks (a
private key in the same file) are ignored and never printed. Works offline.`,
		Example: examples(
			"jwks inspect tls.crt",
			"kubectl get secret issuer-tls -o jsonpath='{.data.tls\\.crt}' | base64 -d | {tp} jwks inspect -",
		),
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&algorithm, "algorithm", "", "JWS algorithm to publish (a JWKSConfig's spec.algorithm); default: the key's own.")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		data, err := readInput(cmd, args[0], jwkset.MaxCertificateBytes)
		if err != nil {
			return err
		}
		chain, err := certificateBlocks(args[0], data)
		if err != nil {
			return err
		}
		key, err := jwkset.ParseChain(chain, algorithm, time.Now())
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		doc, err := jwkset.Marshal([]jwkset.PublishedKey{{Key: key}})
		if err != nil {
			return err
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, doc, "", "  "); err != nil {
			return err
		}
		pretty.WriteByte('\n')
		_, err = out(cmd).Write(pretty.Bytes())
		return err
	}
	return cmd
}

// certificateBlocks keeps the CERTIFICATE blocks of a PEM file, in order, or says in one
// line that it has none.
func certificateBlocks(name string, data []byte) ([]byte, error) {
	var chain []byte
	var others []string
	rest := data
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})...)
		} else {
			others = append(others, b.Type)
		}
	}
	switch {
	case len(chain) > 0:
		return chain, nil
	case len(others) > 0:
		return nil, fmt.Errorf("%s holds no certificate (its PEM blocks: %s)", name, strings.Join(others, ", "))
	}
	return nil, fmt.Errorf("%s holds no PEM certificate", name)
}

func newJWKSVerifyCommand() *cobra.Command {
	var issuer, issuerCA, config, audience string
	var leeway time.Duration
	cmd := &cobra.Command{
		Use:   "verify TOKEN|- (--issuer URL | --jwksconfig NAME)",
		Short: "Verify a JWT against a served JWK Set and say exactly why it does not verify",
		Long: `Verify a JWT as a relying party does, against the JWK Set an issuer serves (--issuer:
its OpenID discovery document's jwks_uri) or the one a JWKSConfig publishes
(--jwksconfig: its ConfigMap; the issuer checked is its spec.issuer). A token that does
not verify gets one line saying why: not a JWT, unknown kid, algorithm, signature,
expired, not yet valid, audience, issuer. Give the token as - to read it from stdin,
which keeps it out of the process list; it is never printed.`,
		Example: examples(
			"jwks verify - --jwksconfig issuer -n default < token",
			"jwks verify \"$TOKEN\" --issuer https://idp.example --audience api",
		),
		Args: cobra.ExactArgs(1),
	}
	f := newClientFlags(cmd, false, true)
	cmd.Flags().StringVar(&issuer, "issuer", "", "Issuer URL: the set is its discovery document's jwks_uri, and the token's iss must be it.")
	cmd.Flags().StringVar(&issuerCA, "issuer-ca", "", "PEM CA bundle to trust for --issuer (default: the system's).")
	cmd.Flags().StringVar(&config, "jwksconfig", "", "JWKSConfig (in -n) whose published set to verify against.")
	cmd.Flags().StringVar(&audience, "audience", "", "Audience the token's aud must include.")
	cmd.Flags().DurationVar(&leeway, "leeway", 0, "Clock skew allowed on exp and nbf.")
	jwksKind, _ := kindNamed("jwksconfig")
	_ = cmd.RegisterFlagCompletionFunc("jwksconfig", completeFlagNames(f, jwksKind))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if (issuer == "") == (config == "") {
			return errors.New("give one of --issuer URL or --jwksconfig NAME")
		}
		token := args[0]
		if token == "-" {
			raw, err := readInput(cmd, "-", 64*1024)
			if err != nil {
				return err
			}
			token = string(raw)
		}
		var keys []jose.JSONWebKey
		var source string
		want := jwkset.Expectation{Audience: audience, Leeway: leeway}
		if issuer != "" {
			var err error
			if keys, source, err = issuerSet(cmd.Context(), issuer, issuerCA); err != nil {
				return err
			}
			want.Issuer = issuer
		} else {
			c, ns, err := f.connect(errOut(cmd))
			if err != nil {
				return err
			}
			cfg := &jwksv1alpha1.JWKSConfig{}
			if err := c.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: config}, cfg); err != nil {
				return apiError(err, jwksKind, ns, config)
			}
			cmName := cfg.Spec.ConfigMapName
			if cmName == "" {
				cmName = cfg.Name + "-jwks"
			}
			cm := &corev1.ConfigMap{}
			if err := c.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: cmName}, cm); err != nil {
				return fmt.Errorf("the JWK Set of JWKSConfig %s/%s (ConfigMap %s): %w", ns, config, cmName, oneLine(err))
			}
			if keys, err = jwkset.Unmarshal([]byte(cm.Data[jwkset.DocumentKey])); err != nil {
				return fmt.Errorf("the JWK Set of JWKSConfig %s/%s (ConfigMap %s) does not parse: %w", ns, config, cmName, oneLine(err))
			}
			source = fmt.Sprintf("JWKSConfig %s/%s", ns, config)
			want.Issuer = cfg.Spec.Issuer
		}
		v, err := jwkset.VerifyToken(token, keys, want, time.Now())
		if err != nil {
			return fmt.Errorf("the token does not verify against the set of %s: %w", source, err)
		}
		aud := "none"
		if len(v.Audience) > 0 {
			aud = strings.Join(v.Audience, ",")
		}
		expires := "never"
		if !v.Expiry.IsZero() {
			expires = when(v.Expiry, time.Now())
		}
		fmt.Fprintf(out(cmd), "valid: signed by kid %s (%s) of %s; issuer %s, subject %s, audience %s, expires %s\n",
			v.KeyID, v.Algorithm, source, orNone(v.Issuer), orNone(v.Subject), aud, expires)
		return nil
	}
	return cmd
}

// issuerSet fetches an issuer's JWK Set through its OpenID discovery document, as a
// relying party (go-oidc, kube-apiserver) does: the document must name the issuer itself.
func issuerSet(ctx context.Context, issuer, caFile string) ([]jose.JSONWebKey, string, error) {
	hc := &http.Client{Timeout: 15 * time.Second}
	if caFile != "" {
		pemData, err := os.ReadFile(caFile)
		if err != nil {
			return nil, "", oneLine(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, "", fmt.Errorf("--issuer-ca %s holds no PEM certificate", caFile)
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	discoveryURL := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(ctx, hc, discoveryURL, &doc); err != nil {
		return nil, "", err
	}
	if doc.Issuer != issuer {
		return nil, "", fmt.Errorf("the discovery document at %s names issuer %q, not %q: relying parties refuse it", discoveryURL, doc.Issuer, issuer)
	}
	if doc.JWKSURI == "" {
		return nil, "", fmt.Errorf("the discovery document at %s has no jwks_uri", discoveryURL)
	}
	var raw json.RawMessage
	if err := getJSON(ctx, hc, doc.JWKSURI, &raw); err != nil {
		return nil, "", err
	}
	keys, err := jwkset.Unmarshal(raw)
	if err != nil {
		return nil, "", fmt.Errorf("the JWK Set at %s does not parse: %w", doc.JWKSURI, oneLine(err))
	}
	return keys, doc.JWKSURI, nil
}

func getJSON(ctx context.Context, hc *http.Client, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return oneLine(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 2<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: not JSON: %w", url, err)
	}
	return nil
}
