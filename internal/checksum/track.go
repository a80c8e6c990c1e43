package checksum

// Track is what a checksum is kept of: Secrets or Ingresses. The control plane publishes
// each track as its own kind, and both it and the data-plane agent name the track so in
// metrics labels, logs and work items.
type Track string

const (
	// TrackSecrets is the TLS and CA Secrets, published as SecretCheckSums.
	TrackSecrets Track = "secrets"
	// TrackIngresses is the Ingresses, published as IngressCheckSums.
	TrackIngresses Track = "ingresses"
)

// The kinds (group tengine.taobao.org) the tracks are published as.
const (
	KindSecretCheckSum  = "SecretCheckSum"
	KindIngressCheckSum = "IngressCheckSum"
)

// Kind is the kind t is published as; "" for a string that is no track.
func (t Track) Kind() string {
	switch t {
	case TrackSecrets:
		return KindSecretCheckSum
	case TrackIngresses:
		return KindIngressCheckSum
	}
	return ""
}
