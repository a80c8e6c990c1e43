# syntax=docker/dockerfile:1
# Build: docker build -t ghcr.io/trustplane/trustplane:0.1.0 .   (without Docker: make images)
FROM golang:1.27.3 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X github.com/trustplane/trustplane/internal/version.Version=${VERSION}" \
      -o /out/trustplane ./cmd/trustplane

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/trustplane /usr/local/bin/trustplane
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/trustplane"]
