#!/usr/bin/env bash
# Turns a folder of class sub-folders (FOLDER/cat/1.jpg, FOLDER/dog/x/2.png, ...) into a Caffe
# list file for `crema convert-imageset FOLDER/ list.txt DB` (or an ImageData layer with
# root_folder: FOLDER/): one "relative/path label" line per image, the classes (the
# sub-folders) sorted by name in byte order and numbered 0..K-1, the images of a class sorted
# by path (sub-folders of a class are searched too). Only image files count (jpg, jpeg, png,
# bmp, ppm, pgm, pbm, tif, tiff, webp; any case); other files and files directly in FOLDER are
# skipped with a note. The class names, one per line in label order (line i = label i), are
# written to LABELS (default: labels.txt beside the list when stdout is a file, else in the
# current folder), like Caffe's synset_words.txt.
# usage: data/make_list.sh [--labels LABELS] FOLDER > list.txt
set -euo pipefail

usage() {
  echo "usage: $0 [--labels LABELS_FILE] FOLDER > list.txt" >&2
  exit 2
}

labels=""
folder=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --labels) [[ $# -ge 2 ]] || usage; labels="$2"; shift 2 ;;
    --labels=*) labels="${1#--labels=}"; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown option $1" >&2; usage ;;
    *) [[ -z "$folder" ]] || usage; folder="$1"; shift ;;
  esac
done
[[ -n "$folder" ]] || usage
if [[ ! -d "$folder" ]]; then
  echo "error: '$folder' is not a folder" >&2
  exit 2
fi
folder="${folder%/}"
[[ -n "$folder" ]] || folder="/"

if [[ -z "$labels" ]]; then
  out="$(readlink -f /proc/$$/fd/1 2>/dev/null || true)"
  if [[ -n "$out" && -f "$out" ]]; then
    labels="$(dirname "$out")/labels.txt"
  else
    labels="labels.txt"
  fi
fi

export LC_ALL=C
classes=()
while IFS= read -r -d '' dir; do
  classes+=("${dir##*/}")
done < <(find -L "$folder" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -print0 | sort -z)
if [[ ${#classes[@]} -eq 0 ]]; then
  echo "error: '$folder' has no class sub-folders (expected FOLDER/<class>/<images>)" >&2
  exit 2
fi

skipped=0
while IFS= read -r -d '' file; do
  echo "note: skipping '$file' (not inside a class folder)" >&2
  skipped=$((skipped + 1))
done < <(find "$folder" -mindepth 1 -maxdepth 1 -type f -print0 | sort -z)

images=0
label=0
tmp_labels="$(mktemp "${labels}.XXXXXX")"
trap 'rm -f "$tmp_labels"' EXIT
for class in "${classes[@]}"; do
  if [[ "$class" == *$'\n'* ]]; then
    echo "error: the class folder name '$class' holds a newline" >&2
    exit 2
  fi
  printf '%s\n' "$class" >> "$tmp_labels"
  count=0
  while IFS= read -r -d '' file; do
    rel="${file#"$folder"/}"
    case "${rel,,}" in
      *.jpg|*.jpeg|*.png|*.bmp|*.ppm|*.pgm|*.pbm|*.tif|*.tiff|*.webp) ;;
      *)
        echo "note: skipping '$file' (not an image file name)" >&2
        skipped=$((skipped + 1))
        continue
        ;;
    esac
    if [[ "$rel" == *$'\n'* ]]; then
      echo "error: the file name '$file' holds a newline; a list file can't name it" >&2
      exit 2
    fi
    printf '%s %d\n' "$rel" "$label"
    count=$((count + 1))
  done < <(find -L "$folder/$class" -name '.*' -prune -o -type f -print0 | sort -z)
  if [[ $count -eq 0 ]]; then
    echo "warning: class $label '$class' has no images" >&2
  fi
  images=$((images + count))
  label=$((label + 1))
done
mv "$tmp_labels" "$labels"
trap - EXIT
echo "listed $images images of ${#classes[@]} classes (labels 0-$((label - 1)) in $labels)$(
  [[ $skipped -gt 0 ]] && echo "; skipped $skipped files")" >&2
