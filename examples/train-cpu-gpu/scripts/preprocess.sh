#!/bin/sh
# Stand-in for preprocess.py: lower-cases every sample of --input into --output, deterministically.
set -eu
while [ $# -gt 0 ]; do
  case "$1" in
    --input) input=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    *) echo "preprocess: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$output"
for f in "$input"/*.csv; do
  tail -n +2 "$f" | tr 'A-Z' 'a-z' | sort > "$output/$(basename "$f")"
done
echo "preprocess: $(cat "$output"/*.csv | wc -l) samples into $output"
