#!/bin/sh
# parity.t - the cuda backend against the cpu backend on one GPU, with
# NVIDIA's model shape on synthetic ml-1m-sized data: sample stream, dropout,
# Adam and segment sums bit for bit, scores within 1e-5, one training step's
# parameters within 1e-4, determinism, the 16-bit precisions
# (tests/gpu/gpu_parity.c says how close is close and why).
. "$(dirname "$0")/../lib.sh"
need_gpu
tmp=$T
"$NCF_BIN/ncf-prep" -q --synthetic ml-1m -o "$tmp/d.ncfc" || bail "ncf-prep failed"
"$GPU_PARITY" "$tmp/d.ncfc"
