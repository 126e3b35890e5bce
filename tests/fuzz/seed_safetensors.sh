#!/bin/sh
# seed_safetensors.sh BIN DIR - seed files for the safetensors fuzzer in DIR:
# small models exported by ncf-infer (with ids; several shapes), cut short.
set -eu
bin=$1
dir=$2
mkdir -p "$dir"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ncf-seed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$bin/ncf-prep" -q --synthetic tiny -o "$tmp/t.ncfc"
n=0
for shape in "--factors 1 --layers 2,1" "--factors 2 --layers 4,2,2" "--factors 1 --layers 2,1,1,1,1"; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	"$bin/ncf-train" -q "$tmp/t.ncfc" -o "$tmp/m$n.ncfm" --device cpu $shape -e 1 -b 4096
	"$bin/ncf-infer" -m "$tmp/m$n.ncfm" --export "$dir/seed$n.safetensors"
	head -c 300 "$dir/seed$n.safetensors" >"$dir/seed$n-cut.safetensors"
done
# a model of named ids (ncf.user_names, ncf.item_names)
printf 'user;item;time\nu1;B 1;1\nu1;B2;2\nu2;B2;3\nu2;7;4\n' >"$tmp/n.csv"
"$bin/ncf-prep" -q --eval-negatives 1 -o "$tmp/n.ncfc" "$tmp/n.csv"
"$bin/ncf-train" -q "$tmp/n.ncfc" -o "$tmp/n.ncfm" --device cpu --factors 1 --layers 2,1 -e 1 -b 2 -k 1
"$bin/ncf-infer" -m "$tmp/n.ncfm" --export "$dir/names.safetensors"
printf '\002\000\000\000\000\000\000\000{}' >"$dir/empty.safetensors"
