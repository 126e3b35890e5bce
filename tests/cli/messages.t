#!/usr/bin/env bash
# messages.t - the texts that are contracts, each compared with its copy
# under tests/expected/: every tool's --help (stdout, exit 0, nothing on
# stderr), ncf-prep --info of caches made from fixed input (a synthetic
# one and a small CSV), the key<TAB>value lines scripts parse; and the
# messages that point the way where a user coming from NVIDIA's scripts
# trips: a PyTorch .pth or an ONNX file given as a model, --layers spelled
# as ncf.py spells it, ncf-infer's short usage naming every mode; files in
# the wrong place, and refusals, that name the next command.
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

# Messages that give the next command: a file in the wrong place says
# what it is and where it goes, a refusal names what to give instead.
# hint NAME STATUS CMD...: CMD exits STATUS with tests/expected/hints/NAME.err
hint() {
	local name=$1 want=$2
	shift 2
	run "$@"
	is "$status" "$want" "$name: exit $want"
	expect "hints/$name.err" "$err" "$name: the message"
}
ncf-train -q r.ncfc -o m.ncfm -e 1 -b 64 --device cpu --factors 4 --layers 8,4 ||
	bail "ncf-train r.ncfc failed"
hint train-model-as-cache 1 ncf-train m.ncfm -o x.ncfm
hint train-ratings-as-cache 1 ncf-train r.csv -o x.ncfm
hint train-cache-as-resume 1 ncf-train r.ncfc --resume r.ncfc -o x.ncfm
hint train-swapped 1 ncf-train m.ncfm --resume r.ncfc -o x.ncfm
hint train-topk-list 2 ncf-train r.ncfc -o x.ncfm -k 1,5,10
hint train-topk-candidates 2 ncf-train r.ncfc -o x.ncfm -k 4 -e 1
hint eval-swapped 1 ncf-eval -m r.ncfc m.ncfm
hint eval-cache-as-model 1 ncf-eval -m r.ncfc r.ncfc
hint eval-model-as-cache 1 ncf-eval -m m.ncfm m.ncfm
hint eval-ratings-as-cache 1 ncf-eval -m m.ncfm r.csv
hint eval-topk-candidates 2 ncf-eval -m m.ncfm -k 2,4 r.ncfc
hint prep-extra-name 2 ncf-prep r.csv out.ncfc
hint prep-cache-as-input 1 ncf-prep -o x.ncfc r.ncfc
hint prep-model-as-input 1 ncf-prep -o x.ncfc m.ncfm
hint prep-info-model 1 ncf-prep --info m.ncfm
hint prep-path-and-file 2 ncf-prep --path r.csv r.csv -o x.ncfc
hint infer-json-score 2 ncf-infer --score --json -m m.ncfm r.csv
hint infer-users-model 2 ncf-infer --bench -m m.ncfm --users 10
hint infer-device-export 2 ncf-infer --export x.safetensors -m m.ncfm --device cpu
hint infer-cache-as-model 1 ncf-infer --score -m r.ncfc r.csv
hint infer-model-as-seen 1 ncf-infer --recommend 2 -m m.ncfm --exclude-seen m.ncfm r.csv
hint infer-num-batches-iterations 2 ncf-infer --bench -m m.ncfm --num_batches 20 --iterations 5
printf '1 10\n2 40\n7 7\n1 20\n' >pairs
hint infer-unknown-after-two 1 ncf-infer --score -m m.ncfm pairs
is "$(wc -l <"$out" | tr -d ' ')" 2 "... and the 2 scores before the unknown id are on stdout"
is "$(ls x.* 2>/dev/null)" "" "no refused command wrote a file"

done_testing
