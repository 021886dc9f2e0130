#!/usr/bin/env bash
# The version of everything that ships, from its one place: [workspace.package] version in
# Cargo.toml (the binaries' --version, the image's tag and label, the manifests' image tag and
# the plugin's archives and krew manifest; api/tests/manifests.rs and image/tests/release.rs
# check that each agrees).
set -euo pipefail
cd "$(dirname "$0")/.."
sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml
