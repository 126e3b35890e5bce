#!/bin/sh
# sass.t - the machine code of the fused tensor-core kernels (kernels/cuda/
# mlp.cu), read from the sm_90 build with cuobjdump: for each matrix kernel
# its HMMA/HGMMA, LDSM (ldmatrix) and generic LD.E counts, local memory
# (STL/LDL: spills, or an array indexed at run time) and the instructions of
# its innermost loop that holds the mma instructions, per mma.  Fails when a
# bf16, fp16 or tf32 kernel loads through generic memory (its fragments must
# come by ldmatrix or ld.shared from 32-bit shared addresses), uses local
# memory, has no mma or no ldmatrix, or divides inside that loop; and when
# the cost model's issue notes (bench_gpu --cost: model_issue_per_mma, from
# the table in mlp.cu) are more than 25% off what the loop issues.  No GPU
# needed; skips without a CUDA build or without cuobjdump and nvdisasm
# (PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm provide them:
# found on PATH, in CUDA_HOME/bin, or in the Python packages' nvidia/*/bin;
# NCF_CUOBJDUMP names one).  NCF_SASS_OBJECT names the object or module to
# read (scripts/gpu-check.sh: the bundle's); it skips without sm_90 code.  The fp32 kernels (MMA_F32: no tensor cores)
# are listed, not held to this.
. "$(dirname "$0")/../lib.sh"
need_cuda_build
obj=${NCF_SASS_OBJECT:-$NCF_ROOT/build/cuda/obj/kernels/cuda/mlp.cu.o}
[ -f "$obj" ] || obj=$NCF_ROOT/build/lib/ncf/ncf-cuda.so
[ -f "$obj" ] || skip_all "no $obj"

# The tool: NCF_CUOBJDUMP, PATH, CUDA_HOME, then PyPI's wheels.
find_tool() {
	command -v "$1" 2>/dev/null && return
	c=${CUDA_HOME:-/usr/local/cuda}/bin/$1
	[ -x "$c" ] && { echo "$c"; return; }
	for d in $(python3 -c 'import nvidia; print(*nvidia.__path__)' 2>/dev/null); do
		for c in "$d"/*/bin/"$1"; do
			[ -x "$c" ] && { echo "$c"; return; }
		done
	done
}
cuobjdump=${NCF_CUOBJDUMP:-$(find_tool cuobjdump)}
[ -n "$cuobjdump" ] || skip_all "cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
nvdisasm=$(find_tool nvdisasm)
[ -n "$nvdisasm" ] || nvdisasm=$(dirname "$cuobjdump")/nvdisasm
[ -x "$nvdisasm" ] || skip_all "nvdisasm not found beside $cuobjdump (pip install nvidia-cuda-nvdisasm)"
command -v c++filt >/dev/null || skip_all "no c++filt to read the kernels' names"
PATH=$(dirname "$nvdisasm"):$PATH
export PATH

"$cuobjdump" -lelf "$obj" 2>/dev/null | grep -q 'sm_90' ||
	skip_all "no sm_90 code in $obj (built for another GPU_ARCH)"
"$cuobjdump" -sass -arch sm_90 "$obj" >"$T/sass" 2>"$T/err"
ok $? "cuobjdump -sass -arch sm_90 $(basename "$obj")" || sed 's/^/# /' "$T/err"

# per kernel: name HMMA HGMMA LDSM LD.E local divisions loop_instructions loop_mma
# (the loop: the smallest backward branch's range that holds mma instructions)
awk '
function hex(s,   v, i) {
	v = 0; s = tolower(s); sub(/^0x/, "", s)
	for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
	return v
}
function flush(   b, q, c, h, d, best, bc, bh, bd) {
	if (fn == "") return
	best = -1
	for (b = 0; b < n; b++) {
		if (op[b] !~ /^BRA/ || tgt[b] == "" || tgt[b] >= addr[b]) continue
		c = h = d = 0
		for (q = 0; q < n; q++) {
			if (addr[q] < tgt[b] || addr[q] > addr[b]) continue
			c++
			if (op[q] ~ /^H(G)?MMA/) h++
			if (op[q] ~ /^(MUFU\.RCP|I2F\.U32\.RP)/) d++
		}
		if (h > 0 && (best < 0 || c < bc)) { best = b; bc = c; bh = h; bd = d }
	}
	printf "%s %d %d %d %d %d %d %d %d\n", fn, hm, hg, ls, ld, lc, best < 0 ? 0 : bd,
		best < 0 ? 0 : bc, best < 0 ? 0 : bh
}
/Function :/ { flush(); fn = $3; n = hm = hg = ls = ld = lc = 0; next }
fn != "" && /^ *\/\*[0-9a-f]+\*\/ / {
	a = $0; sub(/^ *\/\*/, "", a); sub(/\*\/.*/, "", a)
	line = $0; sub(/^ *\/\*[0-9a-f]+\*\/ */, "", line); sub(/ *;.*/, "", line)
	split(line, w, " "); o = w[1]; if (o ~ /^@/) o = w[2]
	addr[n] = hex(a); op[n] = o; tgt[n] = ""
	if (o ~ /^BRA/ && match(line, /0x[0-9a-f]+/)) tgt[n] = hex(substr(line, RSTART, RLENGTH))
	n++
	if (o ~ /^HMMA/) hm++
	if (o ~ /^HGMMA/) hg++
	if (o ~ /^LDSM/) ls++
	if (o ~ /^LD\.E/ || o == "LD") ld++
	if (o ~ /^(STL|LDL)/) lc++
}
END { flush() }' "$T/sass" | c++filt | sed -n 's/^void ncf_cuda::\(linear_[a-z_]*kernel\)<\([^,]*\), \([0-9]\)>([^)]*) /\1 \2 \3 /p' \
	>"$T/counts"
[ -s "$T/counts" ]
ok $? "the fused layers' kernels are in the sm_90 build ($(wc -l <"$T/counts") of them)"

# the cost model's notes: kernel -> "bf16 X fp16 Y tf32 Z"
"$NCF_BENCH_GPU" --cost ml-20m 2>/dev/null |
	awk -F'\t' '$1 == "model_issue_per_mma" { print $2, $3 }' >"$T/notes"

while read -r kernel type mode hmma hgmma ldsm lde local div loop loopmma; do
	case $type in
	__nv_bfloat16) prec=bf16 ;;
	__half) prec=fp16 ;;
	*) prec=$([ "$mode" = 1 ] && echo tf32 || echo fp32) ;;
	esac
	per=$(awk -v l="$loop" -v m="$loopmma" 'BEGIN { if (m) printf "%.2f", l / m; else print 0 }')
	diag "$kernel $prec: HMMA $hmma, HGMMA $hgmma, LDSM $ldsm, LD.E $lde, local $local; inner loop $loop instructions for $loopmma mma ($per each), $div divisions"
	[ "$prec" = fp32 ] && continue
	[ "$lde" -eq 0 ] && [ "$local" -eq 0 ] && [ $((hmma + hgmma)) -gt 0 ] && [ "$ldsm" -gt 0 ] &&
		[ "$div" -eq 0 ]
	ok $? "$kernel $prec: tensor cores fed by ldmatrix, no generic loads, no local memory, no division in the loop"
	note=$(awk -v k="$kernel" -v p="$prec" '$1 == k { for (i = 2; i < NF; i++) if ($i == p) print $(i + 1) }' "$T/notes")
	awk -v a="$per" -v b="${note:-0}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.25 * a) }'
	ok $? "$kernel $prec: the cost note's $note instructions per mma within 25% of the loop's $per (kernels/cuda/mlp.cu)"
done <"$T/counts"
done_testing
