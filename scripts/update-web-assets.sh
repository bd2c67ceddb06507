#!/usr/bin/env bash
# Refreshes the third-party files the built-in web view embeds: installs the
# versions pinned in web/package-lock.json (`npm ci`, integrity-checked) and
# copies their minified dist files into src/http/web/vendor/, which is
# committed, so `cargo build` never needs npm or the network.
#
# To update uPlot: change its version in web/package.json, run
# `npm install --package-lock-only` in web/, then this script, and commit
# web/package*.json with src/http/web/vendor/.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v npm >/dev/null || { echo "npm is missing: install Node.js (Debian: apt-get install npm)" >&2; exit 1; }
(cd web && npm ci --no-audit --no-fund --ignore-scripts)
vendor=src/http/web/vendor
mkdir -p "$vendor"
cp web/node_modules/uplot/dist/uPlot.iife.min.js "$vendor/uPlot.iife.min.js"
cp web/node_modules/uplot/dist/uPlot.min.css "$vendor/uPlot.min.css"
cp web/node_modules/uplot/LICENSE "$vendor/uPlot.LICENSE"
version=$(node -p 'require("./web/node_modules/uplot/package.json").version')
echo "uPlot $version (MIT), from npm via web/package-lock.json; refreshed by scripts/update-web-assets.sh" > "$vendor/README"
ls -l "$vendor"
