#!/bin/sh
# Stand-in for package.py: the model and a manifest in one archive under --output.
set -eu
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    *) echo "package: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "package: no model at $model" >&2; exit 1; }
mkdir -p "$output"
printf 'model sha256 %s\n' "$(sha256sum "$model" | cut -d' ' -f1)" > "$output/MANIFEST"
cp "$model" "$output/best.pt"
touch -t 197001010000 "$output/best.pt" "$output/MANIFEST" # the same model, the same archive
tar czf "$output/model.tgz" -C "$output" best.pt MANIFEST
echo "package: $(cat "$output/MANIFEST")"
