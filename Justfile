# Liqo discovery and peering — the verbs. `just --list` shows them.

# Build every crate (debug).
build:
    cargo build --workspace --all-targets

# The whole test suite (the same command the README and CI run). Integration tests run
# against real API servers when KUBEBUILDER_ASSETS names a folder with kube-apiserver + etcd.
test:
    cargo test --workspace

# The Kubernetes binaries the real tier and the node tier run (VERSION: a release or a minor,
# default 1.36), verified against their published checksums, in one folder (DIR, default
# ~/.local/share/liqo-test-assets/...); prints the KUBEBUILDER_ASSETS= line to test with.
test-assets version="1.36" dir="":
    testenv/test-assets.sh {{version}} {{dir}}

# Format every crate in the house style (rustfmt.toml); CI fails on a diff.
fmt:
    cargo fmt --all

# Lints with warnings as errors (CI runs this before the tests).
lint:
    cargo clippy --workspace --all-targets -- -D warnings

# Regenerate manifests/crds/ from the Rust types (a test fails when they drift).
generate:
    cargo run -q -p liqo-api --bin crdgen

# Benchmarks (release build): webhook throughput and latency (needs `wrk`), reconciler
# memory and requests per peer in steady state, DNS-SD of 1,000 clusters (BIND 9 when
# installed) and mDNS announcement-to-decision time (in a network namespace of its own), the
# dashboard and `kubectl liqo status` at N peers (BENCH_PEERS, default 1,000), and one join
# on two real API servers (KUBEBUILDER_ASSETS; median of JOINS, default 20).
bench:
    cargo bench -p liqo-webhook --bench admission
    cargo bench -p liqo-reconciler --bench steady_state
    cargo bench -p liqo-reconciler --bench discovery
    cargo bench -p liqo-reconciler --bench auth_abuse
    cargo bench -p liqo-reconciler --bench join
    cargo bench -p liqo-reconciler --bench status_write
    cargo bench -p liqo-dashboard --bench dashboard
    cargo bench -p liqo-dashboard --bench users
    cargo bench -p liqo-cli --bench status

# The dashboard audited at 1 and 10,000 peers: axe-core in Chromium and Firefox, Lighthouse
# (desktop preset) on the home and a peer's page; prints each page's scores and the home's
# size and first contentful paint. On an idle machine: the performance figures are timings.
# Needs the npm tools (`npm i -E --prefix /opt/liqo-web-tools lighthouse@12.2.3 axe-core@4.14.1`).
lighthouse:
    cargo test -p liqo-dashboard --test audits -- --nocapture --test-threads=1

# One hub against N simulated peers (release build): a real API server with our webhook and
# reconciler as they ship (and the dashboard), N peers over real TLS in one process,
# scenarios (a)-(i) and (r) one table row each (docs/scaling.md). Runs in a network namespace of its own (root: unshare -n), where
# each peer has an address of its own. `just fleet 10000`, `just fleet 100 --scenarios abc`.
fleet peers="1000" *args:
    cargo build --release -p liqo-webhook -p liqo-reconciler -p liqo-dashboard -p liqo-fleet
    unshare -n sh -c 'ip link set lo up && exec target/release/liqo-fleet --peers {{peers}} {{args}}'

# Fuzz every untrusted input for SECONDS each (cargo-fuzz/libFuzzer; `cargo install
# cargo-fuzz`; RUSTC_BOOTSTRAP=1 lets the stable toolchain build the sanitized targets). New
# inputs go to fuzz/corpus/ (not committed); crashes to fuzz/artifacts/.
fuzz seconds="60":
    for t in admission records peer_answers auth_request certificates; do \
      mkdir -p fuzz/corpus/$t && (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -O $t corpus/$t seeds/$t -- -max_total_time={{seconds}} -rss_limit_mb=2048) || exit 1; \
    done

# Render the installable manifests.
manifests:
    kubectl kustomize manifests/

# Look for Liqo clusters on the LAN (mDNS) and/or in DNS domains, no cluster needed:
# `just discover --domain example.com`, `just discover --advertise`.
discover *args:
    cargo run -q -p liqo-cli -- discover {{args}}

# Run the webhook on this machine without a cluster (self-made certificate in DIR).
webhook-standalone cluster_id="0558de48-097b-4b7d-ba04-6bd2a0f9d24f" dir="/tmp/liqo-webhook-certs":
    cargo run -p liqo-webhook -- --standalone --cluster-id {{cluster_id}} --generate-cert-dir {{dir}} --listen 127.0.0.1:8443 --ops-listen 127.0.0.1:8080

# Webhook configurations pointing the current kubectl context's API server at a webhook
# running on this machine (url clientConfig + our CA as caBundle); pipe into `kubectl apply -f -`.
webhook-local-config url="https://127.0.0.1:8443" dir="/tmp/liqo-webhook-certs":
    cargo run -q -p liqo-certs -- issue --dir {{dir}} --host localhost --host 127.0.0.1
    cargo run -q -p liqo-certs -- inject --ca {{dir}}/ca.crt --url {{url}} manifests/webhook/webhook-configurations.yaml

# The container image (podman or docker, whichever is installed): one static multi-call binary
# FROM scratch, /liqo-webhook, /liqo-reconciler, /liqo-certs, /liqo-dashboard linked to it.
# Prints the image reference last (default liqo-discovery:<version>).
image *tag:
    image/build.sh {{tag}}

# Builds the image and runs each of its commands in it with a read-only root filesystem
# (what CI does; skips loudly where no container engine can run).
image-check:
    image/check.sh

# kubectl-liqo archives, their SHA-256 sums and a krew manifest in dist/VERSION/ (VERSION must
# be the one in Cargo.toml; LIQO_RELEASE_TARGETS and LIQO_RELEASE_URL: see release/release.sh).
release version:
    release/release.sh {{version}}

# Sets the version everywhere it is written (Cargo.toml, Cargo.lock, the manifests' image tags).
set-version version:
    release/set-version.sh {{version}}

# Checks the alert rules and runs their unit tests (promtool, from Debian's prometheus package).
alerts:
    promtool check rules manifests/monitoring/liqo-alerts.rules.yaml
    cd manifests/monitoring/tests && promtool test rules alerts.test.yaml

# Two-cluster end-to-end suite on kind (needs Docker and kind); the checks are
# kind-tests/checks.sh, the same the node tier runs.
e2e:
    kind-tests/run.sh

# A real single-node cluster NAME in a network namespace of its own (kubelet, containerd, our
# image); prints KUBECONFIG=<path> last. Needs the Kubernetes binaries (see docs/testing.md).
node-up name image="":
    kind-tests/node-up.sh {{name}} {{image}}

# Removes node NAME and everything it made.
node-down name:
    kind-tests/node-down.sh {{name}}

# The node tier: two such nodes, the suite's checks, upgrade in place, rolling update, failover,
# then docs/quickstart.md run as written.
e2e-node:
    kind-tests/e2e-node.sh

# docs/quickstart.md run as written on two such nodes, kind replaced by a stand-in
# (kind-tests/kind-stand-in/kind); the node tier runs it last.
quickstart:
    kind-tests/quickstart.sh

# Identities of 10 minutes (the least a token may last) renewed on both sides while a peering
# stays up for 12 (reconciler/tests/peering_faults.rs; left out of `cargo test`, run by .ci/run).
renewal:
    cargo test -p liqo-reconciler --test peering_faults -- --ignored --exact ten_minute_identities_are_renewed_and_the_peering_outlives_them

# The seeded chaos soak on three real control planes (KUBEBUILDER_ASSETS): faults from a fixed
# menu for SECONDS, invariants checked after each; prints the seed first and a summary last,
# fails on a violation. PERIODS: health periods allowed for convergence (default 2); HEALTH:
# the reconcilers' health period in seconds (default 2). CHAOS_LATE=report in the environment
# lists late convergences instead of failing on them (as .ci/run does).
chaos SECONDS="180" SEED="1" PERIODS="2" HEALTH="2":
    CHAOS_SECONDS={{SECONDS}} CHAOS_SEED={{SEED}} CHAOS_PERIODS={{PERIODS}} CHAOS_HEALTH={{HEALTH}} cargo test -p liqo-reconciler --test chaos -- --ignored --nocapture
