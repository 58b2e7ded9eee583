#!/usr/bin/env bash
# Remakes src/assets/fonts/symbols-*.woff2 from the npm packages pinned in package.json
# (@fontsource/dejavu-sans, @fontsource/noto-sans-symbols-2). Needs fontTools with brotli
# (Debian: apt-get install python3-fonttools python3-brotli). After a change of the ranges here,
# change the unicode-range of the @font-face rules in src/styles.css to match.
set -euo pipefail
cd "$(dirname "$0")/.."
out=src/assets/fonts
nm=node_modules/@fontsource
py=${PYTHON:-/usr/bin/python3}
# DejaVu Sans: arrows, ⊘, geometric shapes (◷ ◌ ■ ● ○ ▶ …), ☁, ✓ ✕.
"$py" -m fontTools.subset "$nm/dejavu-sans/files/dejavu-sans-latin-400-normal.woff2" \
  --unicodes="U+2190-21FF,U+2298,U+25A0-25FF,U+2601,U+2713-2718" \
  --flavor=woff2 --output-file="$out/symbols-dejavu-sans.woff2"
# Noto Sans Symbols 2: the media controls (⏸ ⏹ ⏺ …), which DejaVu lacks.
"$py" -m fontTools.subset "$nm/noto-sans-symbols-2/files/noto-sans-symbols-2-symbols-400-normal.woff2" \
  --unicodes="U+23E9-23FA" \
  --flavor=woff2 --output-file="$out/symbols-noto-sans-symbols-2.woff2"
cp "$nm/dejavu-sans/LICENSE" "$out/LICENSE-DejaVu.txt"
cp "$nm/noto-sans-symbols-2/LICENSE" "$out/LICENSE-Noto-Sans-Symbols-2.txt"
