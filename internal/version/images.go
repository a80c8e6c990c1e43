package version

// ImageTag is the tag of the images `make images` builds and the chart and kustomize
// name: the chart's appVersion (test/install checks that they agree).
const ImageTag = "0.1.0"

// ImageRepository is the repository prefix of those images.
const ImageRepository = "ghcr.io/trustplane"

// Image is the reference of one of them: trustplane, jwks-nginx or pause.
func Image(name string) string { return ImageRepository + "/" + name + ":" + ImageTag }
