#!/usr/bin/env bash
# export.t - models that leave ncf and come back (ncf-infer --export, -m
# F.safetensors in ncf-eval and ncf-infer):
#  - ncf -> safetensors -> ncf gives the same probabilities, metrics and
#    recommendations to the last digit, from a file, stdin or a FIFO, and
#    exporting the read file again gives the same bytes;
#  - an independent reader (Python: struct + json) finds exactly the 12
#    tensors of NVIDIA's NeuMF state_dict with PyTorch's shapes, F32, the
#    data exactly covered, the original ids in the metadata in order of
#    first appearance, and scores pairs with the formula of NVIDIA's
#    forward() within 1e-5 of ncf-infer --score;
#  - a file laid out as safetensors' own writer (or the library itself,
#    where importable) lays out a PyTorch state_dict, with no metadata (a
#    converted NVIDIA checkpoint): ncf-eval gives the checkpoint's metrics,
#    ncf-infer wants --ids CACHE and then gives the same numbers;
#  - such a file read on a cache says once that its rows are the cache's
#    and how to check that; other counts are refused (ncf-eval, --ids,
#    --exclude-seen);
#  - the way back into NVIDIA's scripts: the lines of ncf-infer(1) make a
#    .pth that PyTorch loads strictly into NVIDIA's NeuMF names and that
#    scores as ncf does (where torch is importable);
#  - bad files exit 1 with the tensor or field named (tests/expected/export);
#  - ONNX: onnx.checker passes (python3-onnx), ONNX Runtime (where
#    importable) scores 10,000 random known pairs within 1e-5 of ncf-infer
#    --score and gives NaN for unknown ids; the file given back as -m is
#    named for what it is; a build without ONNX exits 3;
#  - usage errors exit 2.
. "$(dirname "$0")/../lib.sh"
cd "$T"
export LC_ALL=C
D="--device cpu"
# NVIDIA's shape in small: 3 hidden layers, so the state_dict has 12 tensors
ncf-prep -q --synthetic tiny --emit-csv >tiny.csv &&
	ncf-prep -q -o t.ncfc tiny.csv &&
	ncf-train -q t.ncfc -o m.ncfm $D --factors 8 --layers 16,16,8,4 -b 1024 -e 3 -l 0.05 \
		--dropout 0 &&
	ncf-eval -q $D -m m.ncfm --scores scores t.ncfc >metrics || bail "could not make the test model"
cut -f1,2 scores >pairs
ncf-infer $D --score -m m.ncfm pairs >want.p || bail "ncf-infer --score failed"
U=$(info users t.ncfc)
I=$(info items t.ncfc)

# The first Python that imports module $1, if any.
py_with() {
	local py
	for py in python3 /usr/bin/python3; do
		"$py" -c "import $1" >/dev/null 2>&1 && { echo "$py"; return 0; }
	done
	return 1
}
PY=$(py_with json)

# ---------------------------------------------------------------------------
# ncf -> safetensors -> ncf
run ncf-infer -m m.ncfm --export m.safetensors
is "$status:$(wc -c <"$err" | tr -d ' ')" "0:0" "--export m.safetensors: exit 0, nothing on stderr"
is "$(ls -A | grep -c '^\.')" 0 "no temporary file is left"
run ncf-infer $D --score -m m.safetensors pairs
cmp -s "$out" want.p
ok $? "--score with the safetensors file: the checkpoint's probabilities, to the last digit"
run ncf-eval $D -m m.safetensors --scores scores.st t.ncfc
cmp -s "$out" metrics && cmp -s scores.st scores
ok $? "ncf-eval: the same HR@10, NDCG@10 and --scores"
printf '1\n2\n7\n' >users
ncf-infer $D --recommend 5 -m m.ncfm --exclude-seen t.ncfc users >rec.want
run ncf-infer $D --recommend 5 -m m.safetensors --exclude-seen t.ncfc users
cmp -s "$out" rec.want
ok $? "--recommend 5 --exclude-seen: the same lists"
run ncf-infer $D --score -m - pairs <m.safetensors
cmp -s "$out" want.p
ok $? "-m - (stdin, told apart by its first byte): the same probabilities"
mkfifo fifo.safetensors
cat m.safetensors >fifo.safetensors &
run ncf-infer $D --score -m fifo.safetensors pairs
wait
cmp -s "$out" want.p
ok $? "-m FIFO named .safetensors: the same probabilities"
rm -f fifo.safetensors
mkfifo fifo.ncfm
cat m.ncfm >fifo.ncfm &
run ncf-infer $D --score -m fifo.ncfm pairs
wait
cmp -s "$out" want.p
ok $? "-m FIFO holding a checkpoint: the same probabilities (the FIFO read once)"
rm -f fifo.ncfm
ncf-infer -m m.safetensors --export again.safetensors
cmp -s again.safetensors m.safetensors
ok $? "exporting the read file again gives the same bytes"
ncf-infer -m m.ncfm --export - --export-format safetensors >stdout.st
cmp -s stdout.st m.safetensors
ok $? "--export - --export-format safetensors: the same bytes on stdout"
ncf-infer -m m.ncfm --export odd.name --export-format safetensors && cmp -s odd.name m.safetensors
ok $? "--export-format decides whatever the name"

# ---------------------------------------------------------------------------
# An independent reader: struct + json, and NVIDIA's forward() by hand.
cat >reader.py <<'EOF'
import json, math, struct, sys

path, pairs, out, uids, iids = sys.argv[1:6]
b = open(path, "rb").read()
n, = struct.unpack("<Q", b[:8])
assert (8 + n) % 8 == 0, "header not padded to 8"
h = json.loads(b[8:8 + n].decode("utf-8"))
meta = h.pop("__metadata__")
data = b[8 + n:]
U, I, F = (int(meta["ncf." + k]) for k in ("users", "items", "factors"))
layers = [int(x) for x in meta["ncf.layers"].split(",")]
# the state_dict of NVIDIA's NeuMF(U, I, F, layers): names and PyTorch shapes
want = {"mf_user_embed.weight": [U, F], "mf_item_embed.weight": [I, F],
        "mlp_user_embed.weight": [U, layers[0] // 2],
        "mlp_item_embed.weight": [I, layers[0] // 2]}
for k in range(1, len(layers)):
    want["mlp.%d.weight" % (k - 1)] = [layers[k], layers[k - 1]]  # nn.Linear: [out, in]
    want["mlp.%d.bias" % (k - 1)] = [layers[k]]
want["final.weight"] = [1, F + layers[-1]]
want["final.bias"] = [1]
assert len(want) == 12, len(want)
assert sorted(h) == sorted(want), sorted(h)
spans = []
t = {}
for name, e in h.items():
    assert e["dtype"] == "F32", (name, e["dtype"])
    assert e["shape"] == want[name], (name, e["shape"], want[name])
    lo, hi = e["data_offsets"]
    count = math.prod(e["shape"])
    assert hi - lo == 4 * count, name
    spans.append((lo, hi))
    t[name] = struct.unpack("<%df" % count, data[lo:hi])
spans.sort()
assert spans[0][0] == 0 and spans[-1][1] == len(data), "data not exactly covered"
assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "holes or overlaps"

def ids(s):
    r = []
    for run in s.split(","):
        a, _, z = run.partition("-")
        r.extend(range(int(a), int(z or a) + 1))
    return r
users, items = ids(meta["ncf.user_ids"]), ids(meta["ncf.item_ids"])
assert len(users) == U and len(items) == I
open(uids, "w").write("".join("%d\n" % x for x in users))
open(iids, "w").write("".join("%d\n" % x for x in items))
urow = {x: r for r, x in enumerate(users)}
irow = {x: r for r, x in enumerate(items)}

def row(name, r):
    w = h[name]["shape"][1]
    return list(t[name][r * w:(r + 1) * w])

def forward(u, i):
    # NeuMF.forward: xmf = mf_user * mf_item; xmlp = cat(mlp_user, mlp_item)
    # through Linear + ReLU; cat(xmf, xmlp); final; sigmoid
    xmf = [a * c for a, c in zip(row("mf_user_embed.weight", u), row("mf_item_embed.weight", i))]
    x = row("mlp_user_embed.weight", u) + row("mlp_item_embed.weight", i)
    for k in range(len(layers) - 1):
        W, bias = t["mlp.%d.weight" % k], t["mlp.%d.bias" % k]
        nin = len(x)
        x = [max(0.0, sum(W[o * nin + j] * x[j] for j in range(nin)) + bias[o])
             for o in range(len(bias))]
    z = xmf + x
    logit = sum(w * v for w, v in zip(t["final.weight"], z)) + t["final.bias"][0]
    return 1.0 / (1.0 + math.exp(-logit))

with open(out, "w") as f:
    for line in open(pairs):
        u, i = (int(x) for x in line.split())
        f.write("%.9g\n" % forward(urow[u], irow[i]))
EOF
# max |a - b| over two files of numbers, line by line
maxdiff() { paste "$1" "$2" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.3g\n", m + 0 }'; }
within() { awk -v d="$1" -v b="$2" 'BEGIN { exit !(d <= b) }'; }
if [ -n "$PY" ]; then
	head -n 505 pairs >pairs.head
	run "$PY" reader.py m.safetensors pairs.head py.p py.users py.items
	ok "$status" "independent reader: the 12 tensors of NVIDIA's state_dict, PyTorch shapes, F32, data exactly covered, header padded"
	[ "$status" = 0 ] || sed 's/^/# /' "$err"
	awk -F, 'NR > 1 && !($1 in s) { s[$1]; print $1 }' tiny.csv >csv.users
	awk -F, 'NR > 1 && !($2 in s) { s[$2]; print $2 }' tiny.csv >csv.items
	cmp -s py.users csv.users && cmp -s py.items csv.items
	ok $? "metadata ids: row r is the r-th user and item to appear in the ratings file (NVIDIA's order)"
	head -n 505 want.p >want.head
	d=$(maxdiff py.p want.head)
	# float32 through 3 layers of at most 16 terms against Python's doubles: ~1e-7
	within "$d" 1e-5
	ok $? "NVIDIA's forward() in Python on the file: within 1e-5 of ncf-infer --score (max $d)"
else
	skip "no python3 for the independent reader"
	skip "no python3"
	skip "no python3"
fi

# The safetensors library's own reader (the one safetensors.torch.load_file uses)
if PYS=$(py_with safetensors.numpy); then
	run "$PYS" -c '
import sys, safetensors, safetensors.numpy
t = safetensors.numpy.load_file(sys.argv[1])
meta = safetensors.safe_open(sys.argv[1], "np").metadata()
assert len(t) == 12 and all(v.dtype.str == "<f4" for v in t.values())
assert t["mlp.1.weight"].shape == (8, 16) and t["final.weight"].shape == (1, 12)
assert meta["ncf.layers"] == "16,16,8,4" and meta["format"] == "pt"' m.safetensors
	ok "$status" "the safetensors library reads the file: 12 float32 tensors, PyTorch shapes, the metadata"
	[ "$status" = 0 ] || sed 's/^/# /' "$err"
else
	skip "no Python imports safetensors (pip install safetensors numpy)"
fi

# ---------------------------------------------------------------------------
# A converted NVIDIA checkpoint: tensors in the order safetensors' writer
# puts them (by name), no metadata, so no ids.
cat >nvidia.py <<'EOF'
import json, struct, sys

src, dst, how = sys.argv[1:4]
drop = sys.argv[4] if len(sys.argv) > 4 else None  # leave out the tensors named drop*
b = open(src, "rb").read()
n, = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
h.pop("__metadata__")
data = b[8 + n:]
if how == "library":  # the safetensors library itself
    try:
        import numpy as np
        import safetensors.numpy
    except ImportError:
        sys.exit(3)
    tensors = {k: np.frombuffer(data[e["data_offsets"][0]:e["data_offsets"][1]], "<f4").reshape(e["shape"])
               for k, e in h.items()}
    safetensors.numpy.save_file(tensors, dst)
else:  # as its writer lays a state_dict out: by name, padded to 8
    out, body, at = {}, b"", 0
    for k in sorted(h):
        if drop and k.startswith(drop):
            continue
        lo, hi = h[k]["data_offsets"]
        out[k] = {"dtype": "F32", "shape": h[k]["shape"], "data_offsets": [at, at + hi - lo]}
        body += data[lo:hi]
        at += hi - lo
    hdr = json.dumps(out, separators=(",", ":")).encode()
    hdr += b" " * ((8 - len(hdr) % 8) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(hdr)) + hdr + body)
EOF
# The same ratings in another order (users by descending id): the same
# counts, other rows, which nothing in a file without ids can tell.
{ head -n 1 tiny.csv; tail -n +2 tiny.csv | sort -t, -k1,1nr -s; } >rev.csv
ncf-prep -q -o rev.ncfc rev.csv
awk -F, 'NR == 1 || $1 != 50' tiny.csv >t49.csv
ncf-prep -q -o t49.ncfc t49.csv
if [ -n "$PY" ] && "$PY" nvidia.py m.safetensors nv.safetensors by-hand; then
	run ncf-eval $D -m nv.safetensors t.ncfc
	cmp -s "$out" metrics
	ok $? "ncf-eval on a state_dict without metadata, ordered by name: the checkpoint's metrics"
	expect export/noids-note.err "$err" "... and says once, by default, whose rows it took and how to check"
	run ncf-eval $D -m nv.safetensors rev.ncfc
	is "$status:$(grep -c 'has no original ids' "$err")" "0:1" \
		"a cache of the same ratings in another order: scored (nothing tells), the note said"
	run ncf-eval $D -m nv.safetensors t49.ncfc
	is "$status:$(cat "$out")" "1:" "a cache of other counts: exit 1, no metrics"
	run ncf-infer $D --score -m nv.safetensors --ids t49.ncfc pairs
	is "$status:$(cat "$out")" "1:" "ncf-infer --ids with other counts: exit 1, nothing scored"
	run ncf-infer $D --recommend 5 -m nv.safetensors --exclude-seen t49.ncfc users
	is "$status:$(cat "$out")" "1:" "ncf-infer --exclude-seen with other counts: exit 1"
	run ncf-infer $D --score -m nv.safetensors pairs
	is "$status" 1 "ncf-infer --score on a file without ids: exit 1"
	expect export/noids.err "$err" "... saying to give --ids CACHE"
	run ncf-infer $D --score -m nv.safetensors --ids t.ncfc pairs
	cmp -s "$out" want.p
	ok $? "--ids t.ncfc: the checkpoint's probabilities"
	expect export/noids-note-infer.err "$err" "... with the note, once"
	run ncf-infer $D --recommend 5 -m nv.safetensors --ids t.ncfc --exclude-seen t.ncfc users
	is "$(grep -c 'has no original ids' "$err")" 1 "--ids and --exclude-seen: the note once"
	run ncf-infer $D --recommend 5 -m nv.safetensors --exclude-seen t.ncfc users
	cmp -s "$out" rec.want
	ok $? "--recommend with --exclude-seen takes the cache's ids: the same lists"
	ncf-infer -qq -m nv.safetensors --ids t.ncfc --export nv2.safetensors
	n2=$(od -An -tu8 -N8 nv2.safetensors | tr -d ' ')
	n1=$(od -An -tu8 -N8 m.safetensors | tr -d ' ')
	cmp -s <(tail -c +$((n2 + 9)) nv2.safetensors) <(tail -c +$((n1 + 9)) m.safetensors)
	ok $? "exported again with --ids: ncf's layout, the same data bytes"
	ncf-infer $D --score -m nv2.safetensors pairs | cmp -s - want.p
	ok $? "... and it carries the ids now"
else
	for k in $(seq 15); do skip "no python3 to write a state_dict without metadata"; done
fi
if [ -n "$PY" ] && "$PY" nvidia.py m.safetensors lib.safetensors library 2>/dev/null; then
	run ncf-eval $D -m lib.safetensors t.ncfc
	cmp -s "$out" metrics
	ok $? "a file written by the safetensors library (numpy): the checkpoint's metrics"
else
	skip "no Python imports safetensors and numpy"
fi
# --ids with a cache of other ids: the rows in reverse order of the users
run ncf-infer $D --score -m m.ncfm --ids rev.ncfc pairs
is "$status" 1 "--ids with a cache of other ids: exit 1"
expect export/ids-other.err "$err" "... saying they do not belong together"

# The way back into NVIDIA's ncf.py and inference.py: the lines of
# ncf-infer(1), EXPORT, "Back into NVIDIA's PyTorch NCF", taken from the
# page and run as they are, write a .pth; torch.load reads it (weights
# only, as PyTorch 2.6 and later do by default), a module with the
# attribute names of NVIDIA's NeuMF loads it with strict=True, and its
# forward pass scores the pairs within 1e-5 of ncf-infer --score (the
# same float32 network, sums in another order).
if PYT=$(py_with "torch, safetensors.torch"); then
	sed -n "/^\.SS Back into NVIDIA's PyTorch NCF/,/^\.EE/p" "$NCF_ROOT/man/ncf-infer.1" |
		sed -n '/^\.EX/,/^\.EE/{/^\.E[XE]/d;s/^    //;s/\\-/-/g;p}' >topth.py
	cp m.safetensors model.safetensors
	run "$PYT" topth.py
	ok "$status" "the man page's $(wc -l <topth.py | tr -d ' ') lines write model.pth"
	[ "$status" = 0 ] || sed 's/^/# /' "$err"
	cat >nvload.py <<'EOF'
import sys, torch, safetensors
sd = torch.load("model.pth", weights_only=True)
meta = safetensors.safe_open("model.safetensors", "pt").metadata()
layers = [int(x) for x in meta["ncf.layers"].split(",")]
U, I, F = int(meta["ncf.users"]), int(meta["ncf.items"]), int(meta["ncf.factors"])
class NeuMF(torch.nn.Module):  # the attribute names of NVIDIA's neumf.py
    def __init__(self):
        super().__init__()
        self.mf_user_embed = torch.nn.Embedding(U, F)
        self.mf_item_embed = torch.nn.Embedding(I, F)
        self.mlp_user_embed = torch.nn.Embedding(U, layers[0] // 2)
        self.mlp_item_embed = torch.nn.Embedding(I, layers[0] // 2)
        self.mlp = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(layers, layers[1:]))
        self.final = torch.nn.Linear(F + layers[-1], 1)
    def forward(self, u, i):
        x = torch.cat([self.mlp_user_embed(u), self.mlp_item_embed(i)], 1)
        for lin in self.mlp:
            x = torch.relu(lin(x))
        g = self.mf_user_embed(u) * self.mf_item_embed(i)
        return torch.sigmoid(self.final(torch.cat([g, x], 1))).view(-1)
model = NeuMF()
model.load_state_dict(sd, strict=True)
def rows(s):
    out = []
    for r in s.split(","):
        a, _, z = r.partition("-")
        out += range(int(a), int(z or a) + 1)
    return {v: k for k, v in enumerate(out)}
ur, ir = rows(meta["ncf.user_ids"]), rows(meta["ncf.item_ids"])
pairs = [l.split() for l in open("pairs")]
u = torch.tensor([ur[int(a)] for a, _ in pairs])
i = torch.tensor([ir[int(b)] for _, b in pairs])
with torch.no_grad():
    p = model(u, i)
want = torch.tensor([float(l) for l in open("want.p")])
err = (p - want).abs().max().item()
print("max abs difference", err)
sys.exit(0 if err < 1e-5 else 1)
EOF
	run "$PYT" nvload.py
	ok "$status" "torch.load reads it, NVIDIA's NeuMF layout loads it strictly, and scores as --score (1e-5)"
	sed 's/^/# /' "$out"
	[ "$status" = 0 ] || sed 's/^/# /' "$err"
else
	skip "no Python imports torch and safetensors (pip install torch safetensors)"
	skip "no Python imports torch and safetensors"
fi

# ---------------------------------------------------------------------------
# Bad files, each made from the good one; each exits 1 naming what is wrong.
hlen() { od -An -tu8 -N8 "$1" | tr -d ' '; }
u64le() {
	local i
	for i in 0 1 2 3 4 5 6 7; do printf "\\$(printf %03o $((($1 >> (8 * i)) & 255)))"; done
}
# remake SRC OUT SED: SRC's header edited by SED, the length recomputed, the data as is
remake() {
	local n
	n=$(hlen "$1")
	tail -c +9 "$1" | head -c "$n" | sed -e "$3" >h.tmp
	{ u64le "$(wc -c <h.tmp)"; cat h.tmp; tail -c +$((n + 9)) "$1"; } >"$2"
}
bad() { # bad NAME MSG: ncf-eval on NAME.safetensors exits 1 with tests/expected/export/NAME.err
	run ncf-eval $D -m "$1.safetensors" t.ncfc
	is "$status" 1 "$2: exit 1"
	expect "export/$1.err" "$err" "$2: the message"
}
MU=$((U * 8 * 4))       # bytes of mf_user_embed.weight
MI=$((MU + I * 8 * 4))  # end of mf_item_embed.weight
head -c 100 m.safetensors >truncated.safetensors
bad truncated "a file cut inside its header"
remake m.safetensors badjson.safetensors 's/"dtype":"F32"/"dtype":F32"/'
bad badjson "bad JSON"
remake m.safetensors f16.safetensors 's/"dtype":"F32"/"dtype":"F16"/'
bad f16 "an F16 tensor"
remake m.safetensors transposed.safetensors 's/"mlp\.1\.weight":{"dtype":"F32","shape":\[8,16\]/"mlp.1.weight":{"dtype":"F32","shape":[16,8]/'
bad transposed "a transposed weight (a shape that disagrees)"
remake m.safetensors overlap.safetensors "s/\[$MU,$MI\]/[$((MU - 4)),$((MI - 4))]/"
bad overlap "overlapping data_offsets"
head -c -4 m.safetensors >short.safetensors
bad short "data_offsets past the end of the file"
remake m.safetensors missing.safetensors 's/,"final\.bias":{[^}]*}//'
bad missing "a missing tensor"
remake m.safetensors nolayer.safetensors 's/,"mlp\.1\.weight":{[^}]*}//; s/,"mlp\.1\.bias":{[^}]*}//'
bad nolayer "a state_dict without the layer mlp.1 (both its tensors named)"
if [ -n "$PY" ] && "$PY" nvidia.py m.safetensors nolast.safetensors by-hand mlp.2.; then
	bad nolast "a state_dict without its last layer, mlp.2 (named, not final.weight's shape)"
else
	skip "no python3 to write a state_dict without a layer"
	skip "no python3"
fi
remake m.safetensors ddp.safetensors 's/"mf_user_embed\.weight"/"module.mf_user_embed.weight"/'
bad ddp "DistributedDataParallel's 'module.' prefix"
remake m.safetensors ids.safetensors 's/"ncf\.user_ids":"1-50"/"ncf.user_ids":"1-49"/'
bad ids "metadata ids that do not fit the tables"
run ncf-eval $D -m m.safetensors t49.ncfc
is "$status" 1 "a model of 50 users on a cache of 49: exit 1"
expect export/cache-users.err "$err" "... naming the tensor and the cache's users"

# ---------------------------------------------------------------------------
# ONNX
if ncf-infer -vV 2>/dev/null | grep -q '^onnx export	not built'; then
	run ncf-infer -m m.ncfm --export m.onnx
	is "$status" 3 "a build without ONNX: --export m.onnx exits 3"
	like "$err" 'ONNX export is not built in \(' "... saying what is missing"
	[ ! -e m.onnx ]
	ok $? "... and writes nothing"
	for k in 1 2 3 4 5 6 7; do skip "ONNX export not built"; done
else
	run ncf-infer -m m.ncfm --export m.onnx
	is "$status:$(wc -c <"$err" | tr -d ' ')" "0:0" "--export m.onnx: exit 0, nothing on stderr"
	run ncf-eval $D -m m.onnx t.ncfc
	like "$err" "^ncf-eval: m.onnx: an ONNX model, which ncf writes .* but does not read" \
		"the exported ONNX file as -m: named for what it is"
	if PYO=$(py_with onnx); then
		cat >check.py <<'EOF'
import sys
import onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
g = m.graph
io = lambda v: (v.name, v.type.tensor_type.elem_type,
                [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim])
assert [io(v) for v in g.input] == [("user", 7, ["N"]), ("item", 7, ["N"])], [io(v) for v in g.input]
assert [io(v) for v in g.output] == [("probability", 1, ["N"])], [io(v) for v in g.output]
ops = {o.domain or "ai.onnx": o.version for o in m.opset_import}
assert ops["ai.onnx"] >= 13 and ops["ai.onnx.ml"] >= 2, ops
used = sorted({n.op_type for n in g.node})
assert set(used) <= {"LabelEncoder", "Gather", "Mul", "Concat", "Gemm", "Relu", "Reshape",
                     "Sigmoid", "Add"}, used
print(" ".join(used))
EOF
		run "$PYO" check.py m.onnx
		ok "$status" "onnx.checker (full check) passes; inputs user, item int64 [N], output probability float [N], opset 13"
		[ "$status" = 0 ] && diag "operators: $(cat "$out")" || sed 's/^/# /' "$err"
	else
		skip "no Python imports onnx (Debian's python3-onnx)"
	fi
	if PYR=$(py_with onnxruntime) && "$PYR" -c 'import numpy' 2>/dev/null; then
		# 10,000 random known pairs, in original ids
		cut -f1 scores | sort -u >ids.u
		cut -f2 scores | sort -u >ids.i
		awk -v seed=13 'NR == FNR { u[n++] = $1; next } { it[m++] = $1 }
			END { srand(seed); for (k = 0; k < 10000; k++)
				print u[int(rand() * n)], it[int(rand() * m)] }' ids.u ids.i >pairs10k
		ncf-infer $D --score -m m.ncfm pairs10k >ncf10k
		cat >ort.py <<'EOF'
import sys
import numpy as np
import onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
p = np.loadtxt(sys.argv[2], dtype=np.int64).reshape(-1, 2)
run = lambda u, i: s.run(["probability"], {"user": u, "item": i})[0]
out = run(p[:, 0].copy(), p[:, 1].copy())
assert out.dtype == np.float32 and out.shape == (len(p),)
# the same numbers in batches of 1 and 7 (dynamic batch)
one = np.concatenate([run(p[k:k + 1, 0].copy(), p[k:k + 1, 1].copy()) for k in range(50)])
seven = np.concatenate([run(p[k:k + 7, 0].copy(), p[k:k + 7, 1].copy()) for k in range(0, 49, 7)])
assert np.abs(one - out[:50]).max() <= 1e-6 and np.abs(seven - out[:49]).max() <= 1e-6
# unknown ids: NaN, and the known pair beside them untouched
u0, i0 = p[0]
x = run(np.array([u0, 999999999, u0, -1], np.int64), np.array([i0, i0, 999999999, i0], np.int64))
assert x[0] == out[0] and np.isnan(x[1:]).all(), x
np.savetxt(sys.argv[3], out, fmt="%.9g")
EOF
		run "$PYR" ort.py m.onnx pairs10k ort10k
		ok "$status" "ONNX Runtime: float32 [N] for N = 10,000, 1 and 7; NaN for unknown user and item ids"
		[ "$status" = 0 ] || sed 's/^/# /' "$err"
		d=$(maxdiff ort10k ncf10k)
		# the same float32 network; only the summation order differs
		within "$d" 1e-5
		ok $? "ONNX Runtime on 10,000 random known pairs: within 1e-5 of ncf-infer --score (max $d)"
	else
		skip "no Python imports onnxruntime and numpy (pip install onnxruntime)"
		skip "no onnxruntime"
	fi
	if [ -n "$PY" ] && [ -e nv.safetensors ]; then
		run ncf-infer -m nv.safetensors --export nv.onnx
		is "$status" 1 "--export .onnx of a model without ids: exit 1"
		[ ! -e nv.onnx ]
		ok $? "... and no file"
		ncf-infer -qq -m nv.safetensors --ids t.ncfc --export nv.onnx && cmp -s nv.onnx m.onnx
		ok $? "with --ids t.ncfc: the same ONNX bytes as from the checkpoint"
	else
		for k in 1 2 3; do skip "no file without ids"; done
	fi
fi

# ---------------------------------------------------------------------------
# Usage
usage() {
	local want=$1 desc=$2
	shift 2
	run ncf-infer "$@"
	is "$status" 2 "$desc: exit 2"
	like "$err" "$want" "$desc: says so"
}
usage "name the file .onnx or .safetensors" "--export to an unknown extension" -m m.ncfm --export m.bin
usage "the formats are onnx and safetensors" "--export-format xml" -m m.ncfm --export m.bin --export-format xml
usage "--export-format is for --export" "--export-format without --export" --score -m m.ncfm --export-format onnx pairs
usage "--export reads no input" "--export with an input file" -m m.ncfm --export m.onnx pairs
usage "choose one of" "--export and --score" --score -m m.ncfm --export m.onnx
usage "no model given" "--export without a model" --export m.onnx
run ncf-infer -m m.ncfm --export nodir/m.onnx --export-format safetensors
is "$status" 1 "--export into a directory that does not exist: exit 1"
like "$err" "nodir/m.onnx: cannot create a file in its directory" "... naming the file"
done_testing
