#!/bin/sh
# demo.sh BIN - make demo: the whole pipeline on built-in synthetic data.
# Runs on a GPU when one is usable (--device auto), else on the CPU.
set -eu
BIN=${1:-build/bin}
D=build/demo
mkdir -p "$D"
step() { printf '\n== %s\n' "$*" >&2; }

step "ncf-prep: synthetic MovieLens-shaped ratings (ml-latest-small sizes), as CSV and as a cache"
"$BIN/ncf-prep" --synthetic ml-latest-small --emit-csv -o "$D/ratings.csv"
head -n 3 "$D/ratings.csv" >&2
"$BIN/ncf-prep" -o "$D/data.ncfc" "$D/ratings.csv"
"$BIN/ncf-prep" --info "$D/data.ncfc"

step "ncf-train: NeuMF, a few epochs, a half-width model that learns fast on small data (the best model goes to model.ncfm)"
"$BIN/ncf-train" "$D/data.ncfc" -o "$D/model.ncfm" -e 6 -b 8192 -l 0.01 --dropout 0.1 \
	--factors 32 --layers 128,128,64,32 --log "$D/train.jsonl"

step "ncf-eval: the model, then the popularity baseline"
"$BIN/ncf-eval" -m "$D/model.ncfm" "$D/data.ncfc"
"$BIN/ncf-eval" --baseline popularity "$D/data.ncfc"

step "ncf-infer --bench: NVIDIA's inference benchmark columns (on a GPU also host to host)"
"$BIN/ncf-infer" --bench -m "$D/model.ncfm" --batch-sizes 1024,16384,262144 --warmup 3 --iterations 30

step "ncf-infer --recommend: the 5 best unseen movies for user 1"
echo 1 | "$BIN/ncf-infer" --recommend 5 -m "$D/model.ncfm" --exclude-seen "$D/data.ncfc"
printf '\nFiles in %s: ratings.csv data.ncfc model.ncfm model.ncfm.last train.jsonl\n' "$D" >&2
