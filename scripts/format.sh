#!/usr/bin/env bash
# Formats the C++ files changed against a base (default: HEAD) with .clang-format.
# Usage: scripts/format.sh [BASE]     scripts/format.sh --all
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--all" ]; then
  files=$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h')
else
  files=$(git diff --name-only --diff-filter=ACMR "${1:-HEAD}" -- '*.cpp' '*.hpp' '*.cu' '*.h'; git ls-files --others --exclude-standard '*.cpp' '*.hpp' '*.cu' '*.h')
fi
[ -n "$files" ] && echo "$files" | xargs clang-format -i
echo "formatted: $(echo "$files" | grep -c . || true) files"
