#!/usr/bin/env bash
# Packs FlashMLA's public source plus the CUTLASS headers it builds against into
# .device/flashmla-src.tar.xz (git-ignored; it travels to the device with `run carry [".device"]`),
# so tools/device_flashmla.sh can build FlashMLA's SM90 sparse FP8 decode kernel there with no network
# (issue 3: FlashMLA side by side with our native FP8 sparse MLA decode). Nothing of FlashMLA or
# CUTLASS is committed to this repository; the tarball is rebuilt from the two mirrors on demand.
#
# Usage: tools/flashmla_prepare.sh FLASHMLA_GIT_DIR CUTLASS_GIT_DIR [OUT_TARBALL]
#   FLASHMLA_GIT_DIR  bare git dir of github:deepseek-ai/FlashMLA (e.g. /work/.mirror/deepseek-ai+FlashMLA/repo)
#   CUTLASS_GIT_DIR   bare git dir of github:NVIDIA/cutlass      (e.g. /work/.mirror/NVIDIA+cutlass/repo)
#   OUT_TARBALL       default <repo root>/.device/flashmla-src.tar.xz
# Env: FLASHMLA_REV (default HEAD of the FlashMLA mirror); CUTLASS_REV (default: the commit FlashMLA
#   pins for its csrc/cutlass submodule when the CUTLASS mirror has it, else the mirror's HEAD, with a
#   warning).
#
# Tarball layout (one top folder, flashmla/):
#   flashmla/                    FlashMLA's tree at FLASHMLA_REV (docs/ left out)
#   flashmla/csrc/cutlass/include, flashmla/csrc/cutlass/tools/util/include, LICENSE.txt
#                                CUTLASS at CUTLASS_REV, where FlashMLA's setup.py expects its submodule
#   flashmla/PROVENANCE.txt      both commits, and whether CUTLASS is the pinned one
# Errors: exits 1 with one line naming the argument / commit that is wrong.
set -euo pipefail

die() { echo "flashmla_prepare: $*" >&2; exit 1; }

[[ $# -ge 2 && $# -le 3 ]] || die "usage: $0 FLASHMLA_GIT_DIR CUTLASS_GIT_DIR [OUT_TARBALL]"
FM=$1
CU=$2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${3:-$ROOT/.device/flashmla-src.tar.xz}

git --git-dir="$FM" rev-parse --verify -q HEAD >/dev/null || die "FLASHMLA_GIT_DIR '$FM' is not a git dir with a HEAD"
git --git-dir="$CU" rev-parse --verify -q HEAD >/dev/null || die "CUTLASS_GIT_DIR '$CU' is not a git dir with a HEAD"

FM_REV=$(git --git-dir="$FM" rev-parse --verify -q "${FLASHMLA_REV:-HEAD}^{commit}") ||
  die "FLASHMLA_REV '${FLASHMLA_REV:-HEAD}' is not a commit of $FM"
git --git-dir="$FM" cat-file -e "$FM_REV:setup.py" 2>/dev/null || die "FlashMLA $FM_REV has no setup.py (wrong repository?)"

# The submodule pin: `git ls-tree` shows it as a 160000 'commit' entry.
PIN=$(git --git-dir="$FM" ls-tree "$FM_REV" csrc/cutlass | awk '$2 == "commit" {print $3}')
[[ -n "$PIN" ]] || die "FlashMLA $FM_REV has no csrc/cutlass submodule entry"
if [[ -n "${CUTLASS_REV:-}" ]]; then
  CU_REV=$(git --git-dir="$CU" rev-parse --verify -q "$CUTLASS_REV^{commit}") || die "CUTLASS_REV '$CUTLASS_REV' is not a commit of $CU"
elif git --git-dir="$CU" cat-file -e "$PIN^{commit}" 2>/dev/null; then
  CU_REV=$PIN
else
  CU_REV=$(git --git-dir="$CU" rev-parse HEAD)
  echo "flashmla_prepare: WARNING: pinned CUTLASS $PIN is not in $CU; using its HEAD $CU_REV" >&2
fi
PINNED=no
[[ "$CU_REV" == "$PIN" ]] && PINNED=yes

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/flashmla/csrc/cutlass"

# FlashMLA: the whole tree but its docs (it is small: ~1.3 MB of text).
git --git-dir="$FM" archive --format=tar "$FM_REV" | tar -x -C "$TMP/flashmla" --exclude='docs'
rmdir "$TMP/flashmla/csrc/cutlass" 2>/dev/null || true   # the submodule's empty folder, if archived
mkdir -p "$TMP/flashmla/csrc/cutlass"
# CUTLASS: only the two include trees setup.py adds to the include path, plus its licence.
git --git-dir="$CU" archive --format=tar "$CU_REV" include tools/util/include LICENSE.txt 2>/dev/null |
  tar -x -C "$TMP/flashmla/csrc/cutlass"

for f in setup.py flash_mla/flash_mla_interface.py csrc/api/sparse_decode.h \
         csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh csrc/cutlass/include/cute/tensor.hpp \
         csrc/cutlass/include/cutlass/cutlass.h csrc/cutlass/tools/util/include/cutlass/util/device_memory.h; do
  [[ -s "$TMP/flashmla/$f" ]] || die "packed tree lacks $f (FlashMLA $FM_REV, CUTLASS $CU_REV)"
done

{
  echo "FlashMLA  $FM_REV  ($(git --git-dir="$FM" log -1 --format='%ad %s' "$FM_REV"))"
  echo "CUTLASS   $CU_REV  ($(git --git-dir="$CU" log -1 --format='%ad %s' "$CU_REV"))"
  echo "CUTLASS pinned by FlashMLA's submodule: $PIN (packed commit is the pinned one: $PINNED)"
  echo "CUTLASS mirror HEAD: $(git --git-dir="$CU" rev-parse HEAD)"
  echo "Packed by tools/flashmla_prepare.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$TMP/flashmla/PROVENANCE.txt"

mkdir -p "$(dirname "$OUT")"
tar -C "$TMP" --sort=name --owner=0 --group=0 --numeric-owner -cf - flashmla | xz -T2 -6 > "$OUT.part"
mv "$OUT.part" "$OUT"
echo "flashmla_prepare: wrote $OUT ($(stat -c %s "$OUT") bytes; $(tar -tJf "$OUT" | grep -vc '/$') files)"
cat "$TMP/flashmla/PROVENANCE.txt"
