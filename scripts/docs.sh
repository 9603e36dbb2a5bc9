#!/usr/bin/env bash
# Builds the documentation site into build/docs (set-up first, with the docs extra) and prints where its front
# page is; `--open` also opens it in a browser. Warnings fail the build, as in CI (.ci/run).
# Usage: bash scripts/docs.sh [--open]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
open=0
for arg in "$@"; do
  case "$arg" in
    --open) open=1 ;;
    *) echo "usage: bash scripts/docs.sh [--open]" >&2; exit 2 ;;
  esac
done
bash scripts/bootstrap.sh --docs
PY=${ROARFAST_VENV:-$PWD/.venv}/bin/python
"$PY" -m sphinx -W --keep-going -q -b html docs build/docs
page=$PWD/build/docs/index.html
echo "the documentation: $page"
if [ "$open" = 1 ]; then
  "$PY" -m webbrowser "file://$page"
fi
