#!/usr/bin/env bash
# messages.t - the texts that are contracts, each compared with its copy
# under tests/expected/: every tool's --help (stdout, exit 0, nothing on
# stderr), ncf-prep --info of caches made from fixed input (a synthetic
# one and a small CSV), the key<TAB>value lines scripts parse; and the
# messages that point the way where a user coming from NVIDIA's scripts
# trips: a PyTorch .pth or an ONNX file given as a model, --layers spelled
# as ncf.py spells it, ncf-infer's short usage naming every mode.
# After a deliberate change, NCF_UPDATE_EXPECTED=1 rewrites the copies.
. "$(dirname "$0")/../lib.sh"
cd "$T" || bail "cannot cd to $T"

for tool in ncf-prep ncf-train ncf-eval ncf-infer; do
	run "$tool" --help
	is "$status:$(wc -c <"$err" | tr -d ' ')" "0:0" "$tool --help: exit 0, nothing on stderr"
	expect "help/$tool.out" "$out" "$tool --help: the usage"
done

ncf-prep -q --synthetic tiny -o tiny.ncfc || bail "ncf-prep --synthetic tiny failed"
run ncf-prep --info tiny.ncfc
is "$status:$(wc -c <"$err" | tr -d ' ')" "0:0" "--info of a synthetic cache: exit 0, nothing on stderr"
expect info/synthetic-tiny.out "$out" "--info of ncf-prep --synthetic tiny: every line"

cat >r.csv <<'EOF'
userId,movieId,rating,timestamp
1,10,4.0,100
1,20,3.5,300
2,10,5.0,200
1,30,1.0,200
2,40,2.0,150
3,30,4.0,50
3,10,4.0,60
3,10,2.0,40
4,50,3.0,10
EOF
ncf-prep -q --eval-negatives 3 -o r.ncfc r.csv || bail "ncf-prep r.csv failed"
run ncf-prep --info r.ncfc
is "$status" 0 "--info of a CSV's cache: exit 0"
expect info/csv.out "$out" "--info of a 9-line CSV's cache: every line"

# Files of other kinds as -m: what they are and what to do, exit 1.
printf 'PK\003\004\024\000\000\000\000\000archive/data.pkl' >model.pth
printf '\200\002}q\000(X\006\000\000\000' >old.pth
printf '\010\007\022\007pytorch\032\0032.1:\000' >model.onnx
for f in model.pth old.pth model.onnx; do
	run ncf-eval -m "$f" r.ncfc
	is "$status" 1 "ncf-eval -m $f: exit 1"
	expect "hints/eval-${f%.*}-${f#*.}.err" "$err" "... saying what it is and what to do"
done
run ncf-infer --score -m model.pth /dev/null
is "$status" 1 "ncf-infer -m model.pth: exit 1"
expect hints/infer-model-pth.err "$err" "... the same words"
# NVIDIA's spelling of --layers, separate or quoted with spaces: the form to use
run ncf-train --layers 256 256 128 64 r.ncfc -o m.ncfm
is "$status" 2 "--layers 256 256 128 64: exit 2"
expect hints/layers-separate.err "$err" "... showing --layers 256,256,128,64"
run ncf-train r.ncfc -o m.ncfm --layers "64 32 16"
is "$status" 2 "--layers '64 32 16': exit 2"
expect hints/layers-spaces.err "$err" "... showing --layers 64,32,16"
run ncf-train --layers 64 r.ncfc -o m.ncfm
expect hints/layers-one.err "$err" "--layers with one size before the cache: as before"
# ncf-infer's short usage after an error names every mode
run ncf-infer -m m.ncfm
is "$status" 2 "ncf-infer without a mode: exit 2"
expect hints/infer-no-mode.err "$err" "... the synopsis lists --export too"

done_testing
