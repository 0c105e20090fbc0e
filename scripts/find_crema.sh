# Sourced by models/train_own.sh and the examples/*/run.sh scripts.
# find_crema ROOT [PATH]: prints the crema binary to run: PATH when given, else ROOT/build/crema,
# ROOT/build*/crema, then crema on PATH; exits 2 (from the script, when used as
# crema="$(find_crema ...)" under set -e) when there is none.
find_crema() {
  local root="$1" candidate
  if [[ -n "${2:-}" ]]; then
    if [[ ! -x "$2" || -d "$2" ]]; then
      echo "error: '$2' is not an executable crema" >&2
      exit 2
    fi
    echo "$2"
    return
  fi
  for candidate in "$root"/build/crema "$root"/build*/crema "$(command -v crema || true)"; do
    if [[ -n "$candidate" && -x "$candidate" && ! -d "$candidate" ]]; then
      echo "$candidate"
      return
    fi
  done
  echo "error: no crema binary (looked in $root/build*/ and PATH); build it or pass --crema" >&2
  exit 2
}
