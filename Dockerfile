# syntax=docker/dockerfile:1
# One image, four static binaries: /liqo-webhook, /liqo-reconciler, /liqo-certs, /liqo-dashboard
# (the in-cluster dashboard, manifests/dashboard).
#   docker build -t liqo-discovery:latest .      (or: just image)
# The manifests pick the binary with `command:`; the default entrypoint is the reconciler.

FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
RUN rustup target add "$(uname -m)-unknown-linux-musl"
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    set -eu; \
    target="$(uname -m)-unknown-linux-musl"; \
    cargo build --release --locked --target "$target" -p liqo-webhook -p liqo-reconciler -p liqo-certs -p liqo-dashboard; \
    mkdir /out; \
    for bin in liqo-webhook liqo-reconciler liqo-certs liqo-dashboard; do cp "target/$target/release/$bin" /out/; done

# distroless static: no shell, no package manager; user 65532 (nonroot), as the manifests expect.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/liqo-reconciler"]
