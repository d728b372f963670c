#!/usr/bin/env bash
# Installs TensorFlow.js (npm @tensorflow/tfjs, with its CPU backend) where
# tests/tfjs/tfjs_test.cc looks for it, so that the test loads Strata's
# TensorFlow.js export in TensorFlow.js itself instead of skipping.
#
#   scripts/install_tfjs.sh            # -> ${XDG_CACHE_HOME:-~/.cache}/strata/tfjs-4.22.0
#   STRATA_TFJS_DIR=/opt/tfjs scripts/install_tfjs.sh
#
# Needs node and npm (Debian: apt-get install nodejs npm) and the npm
# registry; about 20 s and 300 MB (69 packages, mostly @tensorflow/*). A
# directory that already holds the package is left as it is.
set -euo pipefail

version=4.22.0
dir=${STRATA_TFJS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/tfjs-$version}

if [[ -f "$dir/node_modules/@tensorflow/tfjs/package.json" ]]; then
  echo "TensorFlow.js is already in $dir"
  exit 0
fi
command -v npm > /dev/null || { echo "install_tfjs.sh: npm not found (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
[[ -f package.json ]] || echo '{"name": "strata-tfjs-test", "private": true}' > package.json
npm install --no-audit --no-fund --ignore-scripts "@tensorflow/tfjs@$version"
echo "TensorFlow.js $version installed in $dir"
