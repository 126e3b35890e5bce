#!/usr/bin/env bash
# given.t - ratings as people have them and splits made elsewhere:
# ncf-prep's --columns, --delimiter, ISO 8601 dates and ids that are text;
# NVIDIA's feature spec (--feature-spec) and the NCF paper's files
# (--ncf-paper), through ncf-prep, ncf-train and ncf-eval; and every
# crafted file refused with its file, line and what was expected (the
# messages are contracts in tests/expected/given/), exit 1, nothing left
# behind.
. "$(dirname "$0")/../lib.sh"

cd "$T" || bail "cannot cd to $T"
mkdir in

# body FILE: a cache's bytes after its meta section (the arrays).
body() {
	local comp
	comp=$(od -An -t u8 -j 48 -N 8 "$1" | tr -d ' ')
	tail -c +$((64 + comp + 1)) "$1"
}

# refused NAME STATUS DESC ARGS...: ncf-prep ARGS -o o.NAME/x.ncfc exits
# STATUS with one line on stderr (with exit 2: and the synopsis, two
# lines more) equal to tests/expected/given/NAME.err, nothing on stdout
# and no file left in o.NAME.
refused() {
	local name=$1 want=$2 desc=$3
	shift 3
	mkdir "o.$name"
	run ncf-prep -o "o.$name/x.ncfc" "$@"
	is "$status" "$want" "$desc: exit $want"
	is "$(wc -l <"$err" | tr -d ' ')" "$([ "$want" = 2 ] && echo 3 || echo 1)" "$desc: one line on stderr"
	expect "given/$name.err" "$err" "$desc: the message"
	is "$(ls -A "o.$name")$(cat "$out")" "" "$desc: no output left behind"
}

# --- ratings as people have them ----------------------------------------------
H='userId,movieId,rating,timestamp'
R='1,10,4.0,100\n1,20,3.5,300\n2,10,5.0,200\n1,30,1.0,200\n2,40,2.0,150\n3,30,4.0,50\n3,10,4.0,60\n'
printf "$H\n$R" >in/ref.csv
ncf-prep -q -o ref.ncfc in/ref.csv || bail "cannot prepare in/ref.csv"

# same_as NAME DESC ARGS...: ncf-prep ARGS reads in/NAME into the arrays of ref.csv's cache
same_as() {
	local name=$1 desc=$2
	shift 2
	run ncf-prep -o "$name.ncfc" "$@" "in/$name"
	is "$status" 0 "$desc: exit 0"
	cmp -s <(body ref.ncfc) <(body "$name.ncfc")
	ok $? "$desc: the arrays of the ml-20m CSV"
}
printf "$(printf "$R" | awk -F, '{ print $1 ";" $4 ";" $2 }')\n" >in/semi-nohdr.csv
same_as semi-nohdr.csv "no header, ';', columns by number" --delimiter ';' --columns user=1,item=3,time=2
printf "customer;x;product;date\n$(printf "$R" | awk -F, '{ print $1 ";;" $2 ";" $4 }')\n" >in/named.csv
same_as named.csv "a header of other names, ';' detected" --columns user=customer,item=product,time=date
# a rating with a decimal comma, as files separated by ';' write it (checked, dropped)
printf "user;item;rating;timestamp\n$(printf "$R" | awk -F, '{ sub(/\./, ",", $3); print $1 ";" $2 ";" $3 ";" $4 }')\n" >in/comma.csv
same_as comma.csv "';' and ratings with a decimal comma (4,5)"
printf "uid\tsid\ttime\n$(printf "$R" | awk -F, '{ print $1 "\t" $2 "\t" $4 }')\n" >in/tab.tsv
same_as tab.tsv "a tab-separated header" --delimiter tab --columns user=uid,item=sid,time=time
# dates: 1970-01-01T00:01:40Z is 100; zones and dates without a time
D='1,10,4.0,1970-01-01T00:01:40Z\n1,20,3.5,1970-01-01 02:05:00+02:00\n2,10,5.0,1970-01-01T00:03:20\n'
D="${D}1,30,1.0,1970-01-01T00:03:20.750Z\n2,40,2.0,1969-12-31T19:02:30-05:00\n3,30,4.0,1970-01-01T00:00:50\n"
D="${D}3,10,4.0,1970-01-01T00:01:00\n"
printf "user,item,rating,time\n$D" >in/dates.csv
same_as dates.csv "ISO 8601 dates and date-times, zones or UTC"
# Unix seconds with a fraction (milliseconds divided by 1000), and RFC
# 3339's lower-case t and z: the fraction dropped, as a date-time's is
F='1,10,4.0,100.25\n1,20,3.5,300.999\n2,10,5.0,200.\n1,30,1.0,1970-01-01t00:03:20z\n2,40,2.0,150.5\n'
printf "user,item,rating,time\n${F}3,30,4.0,50.0\n3,10,4.0,60.000001\n" >in/fractions.csv
same_as fractions.csv "Unix seconds with a fraction, lower-case t and z"
printf "user,item,time\nalice,B 01,2000-07-30\nalice,B02,2000-07-31\nbob,B 01,1999-01-01\nbob,7,2000-01-01\n" >in/names.csv
run ncf-prep -o names.ncfc in/names.csv
is "$status:$(info user_ids names.ncfc):$(info item_ids names.ncfc):$(info version names.ncfc)" \
	"0:names:names:2" "ids that are text: kept as names, a version 2 cache"
# names end to end: the model keeps them (a version 2 checkpoint), every
# tool reads and prints them, the exports carry them
printf "user,item,time\nalice,B 01,2000-07-30\nalice,B02,2000-07-31\nbob,B 01,1999-01-01\nbob,7,2000-01-01\ncarol,B02,2001-01-01\ncarol,7,2001-01-02\n" >in/names3.csv
ncf-prep -q --eval-negatives 1 -o names3.ncfc in/names3.csv || bail "cannot prepare names"
run ncf-train -q --device cpu names3.ncfc -o names3.ncfm -e 2 -b 4 -f 4 --layers 8,4 -k 1
is "$status:$(od -An -t u4 -j 8 -N 4 names3.ncfm | tr -d ' ')" "0:2" "a model of named ids: version 2"
run ncf-eval -k 1 -m names3.ncfm --scores scores3.tsv names3.ncfc
is "$status:$(cut -f1 scores3.tsv | sort -u | tr '\n' ' ')" "0:alice bob carol " "ncf-eval --scores prints the names"
printf 'alice\tB 01\nbob,7\ncarol 7\n' >pairs3
run ncf-infer -m names3.ncfm --score pairs3
is "$status:$(wc -l <"$out" | tr -d ' ')" "0:3" "ncf-infer --score reads names (a tab, a comma or spaces between)"
cp "$out" score3.want
printf 'zed\tB02\n' >unknown3
run ncf-infer -m names3.ncfm --score unknown3
expect given/unknown-name.err "$err" "an unknown name: said as the name"
run ncf-infer -m names3.ncfm --recommend 1 - <<<"bob"
like "$out" '^bob	(B 01|B02|7)	0\.' "ncf-infer --recommend prints the names"
run ncf-infer -m names3.ncfm --export names3.safetensors
run ncf-infer -m names3.safetensors --score pairs3
cmp -s "$out" score3.want
ok $? "the safetensors export keeps the names (ncf.user_names): the same scores"
run ncf-infer -m names3.ncfm --export names3.onnx
is "$status" 0 "the ONNX export of named ids: string inputs"
if python3 -c 'import onnxruntime' 2>/dev/null; then
	run python3 -c "
import numpy as np, onnxruntime as ort
s = ort.InferenceSession('names3.onnx')
p = s.run(None, {'user': np.array(['alice', 'bob', 'carol', 'zed'], dtype=object),
                 'item': np.array(['B 01', '7', '7', 'B02'], dtype=object)})[0]
print(s.get_inputs()[0].type)
for x in p: print('nan' if x != x else '%.6f' % x)"
	is "$(head -n 1 "$out")" "tensor(string)" "onnxruntime: the input is a string tensor"
	is "$(sed -n 5p "$out")" nan "onnxruntime: an unknown name is NaN"
	# within 1e-5: ONNX Runtime's products sum in another order than ncf's
	# (a few float32 roundings of probabilities near 0.6, ~1e-7 each)
	sed -n 2,4p "$out" | paste - score3.want |
		awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) bad = 1 } END { exit bad }'
	ok $? "onnxruntime: the scores of ncf-infer --score, within 1e-5"
else
	skip "no onnxruntime (pip install onnxruntime) for the ONNX export of names"
fi
# names through the spilled protocol: the same cache at -S 1M as in
# memory, with --min-ratings dropping users too
awk 'BEGIN { print "user;item;time"
	for (i = 0; i < 60000; i++) printf "u%d;i%d;%d\n", (i * 7919) % 997, (i * 104729) % 3001, i % 5000 }' >in/many.csv
for m in 1 61; do
	ncf-prep -q --min-ratings $m -o mem.ncfc in/many.csv
	ncf-prep -q -S 1M --min-ratings $m -o spill.ncfc in/many.csv
	cmp -s mem.ncfc spill.ncfc
	ok $? "names, --min-ratings $m: spilled at -S 1M, the same bytes as in memory ($(info users mem.ncfc) users)"
done
printf "user,item,time\n10,20,1\n10,21,2\n11,20,3\n" >in/numbers.csv
run ncf-prep -o numbers.ncfc in/numbers.csv
is "$(info user_ids numbers.ncfc):$(info version numbers.ncfc)" "numbers:1" \
	"integer ids: numbers, a version 1 cache as before"

refused headerless 1 "a header-less CSV without --columns" in/semi-nohdr.csv
# a spreadsheet's export: BOM, CRLF, quoted names with spaces; the hint
# quotes --columns for the shell
printf '\357\273\277"User ID","Item ID","Rating","Date"\r\n"u1","i1","4","2000-07-30"\r\n' >in/excel.csv
refused excel 1 "a header with spaces: the hint is quoted for the shell" in/excel.csv
run ncf-prep -o excel.ncfc --columns 'user=User ID,item=Item ID,time=Date' in/excel.csv
is "$status" 0 "... and the quoted --columns reads it"
# a ';' header whose quoted name holds a comma: the separator is ';'
printf '"cust";"Buyer, ID";"product";"date"\n%s\n' "$(printf "$R" | awk -F, '{ print $1 ";x;" $2 ";" $4 }')" >in/quoted-comma.csv
same_as quoted-comma.csv "a comma inside a quoted name of a ';' header" --columns user=cust,item=product,time=date
printf 'a;"b"x;c\n1;2;3\n' >in/bad-quote.csv
refused bad-quote 1 "a malformed header names its separator" in/bad-quote.csv
printf 'cust-1;2000-07-30T20:45:03+02:00;4.0;sku-1\ncust-1;2000-07-30 18:20:47;4.0;sku-3\n' >in/text-nohdr.csv
refused text-nohdr 1 "a header-less file whose first field is text: a time shows it is data" \
	in/text-nohdr.csv
printf "uid,sid,rating,time\n1,2,3,4\n" >in/uid-sid.csv
refused uid-sid 1 "a header naming no item column" in/uid-sid.csv
printf '1,10,4.0,100\r\n2,3,4,5\r\n' >in/crlf.csv
refused crlf-nohdr 1 "a CRLF header-less file: no CR in the message" in/crlf.csv
printf "user,item,time\n1,2,2000-02-30\n" >in/feb30.csv
refused feb30 1 "a date that is no day" in/feb30.csv
printf 'user;item;time\n"a\tb";2;1\n' >in/ctl.csv
refused control 1 "an id with a tab" in/ctl.csv
refused no-column 1 "--columns naming no column of the header" --columns user=user,item=sku,time=time \
	in/names.csv
refused columns-usage 2 "--columns without time=" --columns user=1,item=2 in/ref.csv
refused delimiter-usage 2 "--delimiter of two characters" --delimiter ';;' in/ref.csv
refused columns-format 2 "--columns with a MovieLens --format" --columns user=1,item=2,time=4 \
	--format ml-1m in/ref.csv

# --- NVIDIA's feature spec ------------------------------------------------------
nv=$NCF_ROOT/../shared/peer/nvidia-ncf-pytorch/data/csv_conversion
if [ -f "$nv/feature_spec.yaml" ]; then
	cp -r "$nv" nv
	run ncf-prep -o nv.ncfc --feature-spec nv/feature_spec.yaml
	is "$status" 0 "NVIDIA's example: ncf-prep reads it"
	is "$(info split nv.ncfc) $(info users nv.ncfc) $(info items nv.ncfc) $(info train_positives nv.ncfc) $(info train_negatives nv.ncfc) $(info eval_negatives_per_user nv.ncfc)" \
		"given 10 20 42 54 2" "... 10 users, 20 items, 42 positives, 54 explicit negatives, 2 candidates"
	run ncf-train -q --device cpu nv.ncfc -o nv.ncfm -e 2 -b 64 -k 3
	is "$status" 0 "... ncf-train -k 3 trains on it"
	run ncf-eval -k 3 -m nv.ncfm nv.ncfc
	is "$status:$(grep -c '^hr@3	' "$out")" "0:1" "... ncf-eval -k 3 evaluates it, as NVIDIA runs it"
	like "$err" "^ncf-eval: HR@3 is 1 whatever the model: nv.ncfc has 3 candidates per user" \
		"... saying that HR@3 is 1 whatever the model"
	run ncf-eval -k 1,3 -m nv.ncfm nv.ncfc
	like "$err" "^ncf-eval: HR@3 is 1 whatever the model" "... and so with -k 1,3, for its second K"
	run ncf-prep -o nv2.ncfc nv/feature_spec.yaml
	cmp -s nv.ncfc nv2.ncfc
	ok $? "... the YAML as FILE is read as --feature-spec"
	run ncf-prep -o nv3.ncfc --feature-spec nv
	cmp -s nv.ncfc nv3.ncfc
	ok $? "... --feature-spec DIR reads DIR/feature_spec.yaml, as NVIDIA's ncf.py --data DIR"
else
	skip "NVIDIA's example is not in ../shared/peer"
fi

# spec DIR: a feature spec in DIR (u, i, l in two train chunks and one
# test chunk over two files; user cardinality 3) and its CSV files.
spec() {
	mkdir -p "$1"
	cat >"$1/feature_spec.yaml" <<'EOF'
feature_spec:
  u: {cardinality: 3}
  i: {cardinality: auto}
  l:
metadata:
  test_samples_per_series: 3
source_spec:
  train:
    - type: csv
      features: [u, i]
      files: [ui.csv]
    - type: csv
      features: [l]
      files: [l.csv]
  test:
    - type: csv
      features: [u, i, l]
      files: [t1.csv, t2.csv]
channel_spec:
  user_ch: [u]
  item_ch: [i]
  label_ch: [l]
EOF
	printf '0,1\n0,2\n1,1\n1,3\n2,4\n0,5\n' >"$1/ui.csv"
	printf '1\n1\n1\n0\n1\n0\n' >"$1/l.csv"
	printf '0,6,0\n0,3,1\n0,6,0\n' >"$1/t1.csv"
	printf '1, 2, 1\n1, 4, 0\n1, 5, 0\n2,1,0\n2,2,1\n2,2,0' >"$1/t2.csv"
}
spec good
run ncf-prep -o good.ncfc --feature-spec good/feature_spec.yaml
is "$status:$(info users good.ncfc):$(info items good.ncfc):$(info train_negatives good.ncfc)" \
	"0:3:6:2" "a feature spec of chunks side by side, a last line without its end: read"
run ncf-train -q --device cpu good.ncfc -o good.ncfm -e 1 -b 4 -f 4 --layers 8,4 -k 1
run ncf-eval -k 1 -m good.ncfm --scores scores.tsv good.ncfc
is "$status:$(cut -f1,2 scores.tsv | tr '\t\n' ', ')" "0:0,3 0,6 0,6 1,2 1,4 1,5 2,2 2,1 2,2 " \
	"ncf-eval --scores lists the given candidates as given (repeats kept)"

# broken NAME DESC SED [FILE]: spec in NAME, FILE (default
# feature_spec.yaml) edited by sed SED, refused as tests/expected/given/NAME.err
broken() {
	spec "$1"
	sed -i "$3" "$1/${4:-feature_spec.yaml}"
	refused "$1" 1 "$2" --feature-spec "$1/feature_spec.yaml"
}
broken bad-yaml "YAML that is not YAML" 's/^  u: {cardinality: 3}/  u: {cardinality: 3/'
broken tab-yaml "a YAML indented by a tab: the message says so" 's/^  u: /\tu: /'
broken no-metadata "no metadata" '/^metadata:/,/test_samples/d'
broken huge-series "test_samples_per_series of 10^12" 's/: 3$/: 1000000000000/'
broken huge-cardinality "a cardinality of 10^20" 's/cardinality: 3/cardinality: 100000000000000000000/'
broken missing-file "a file that is not there" 's/l.csv/gone.csv/'
broken tensor "a chunk of torch tensors" '0,/type: csv/s//type: torch_tensor/'
broken two-chunks "a feature in two chunks" 's/features: \[l\]/features: [l, i]/'
broken unequal "chunks of unequal length" '$d' l.csv
broken out-of-range "a user id past its cardinality" 's/^2,4/3,4/' ui.csv
broken label "a label that is not 0 or 1" 's/^0$/2/' l.csv
spec test-user
sed -i 's/cardinality: 3/cardinality: 4/' test-user/feature_spec.yaml
sed -i 's/^2,/3,/' test-user/t2.csv
refused test-user 1 "a test user not in train" --feature-spec test-user/feature_spec.yaml
broken short "a last series short of its rows" '$d' t2.csv
broken two-positives "two positives in one series" 's/^0,6,0/0,6,1/' t1.csv
broken no-positive "a series without a positive" 's/^0,3,1/0,3,0/' t1.csv
broken mixed "a series of two users" '2s/^0,/1,/' t1.csv
broken no-series "a user with training rows and no series" '4,$d' t2.csv
broken fields "a row of another number of fields" '1s/$/,9/' t1.csv
refused spec-seed 2 "a feature spec with --eval-negatives" --eval-negatives 5 \
	--feature-spec good/feature_spec.yaml

# --- the NCF paper's files ------------------------------------------------------
paper() {
	mkdir -p "$1"
	printf '0\t0\t4\t100\n0\t1\t5\t101\n1\t1\t3\t50\n1\t2\t4\t60\n2\t0\t1\t7\n' >"$1/x.train.rating"
	printf '0\t2\t4\t200\n1\t3\t5\t70\n2\t3\t2\t9\n' >"$1/x.test.rating"
	printf '(0,2)\t3\t4\n(1,3)\t0\t4\n(2,3)\t4\t4\n' >"$1/x.test.negative"
}
paper p
run ncf-prep -o p.ncfc --ncf-paper p/x
is "$status:$(info split p.ncfc):$(info users p.ncfc):$(info items p.ncfc):$(info eval_negatives_per_user p.ncfc)" \
	"0:given:3:5:2" "the paper's files: read"
run ncf-prep -o p2.ncfc p/x.test.negative
cmp -s p.ncfc p2.ncfc
ok $? "... detected from the name of one of them"
run ncf-train -q --device cpu p.ncfc -o p.ncfm -e 2 -b 4 -f 4 --layers 8,4
run ncf-eval -k 1 -m p.ncfm p.ncfc
is "$status:$(grep -c '^hr@1	' "$out")" "0:1" "... trained and evaluated"

# paper_broken NAME DESC FILE SED
paper_broken() {
	paper "$1"
	sed -i "$4" "$1/x.$3"
	refused "$1" 1 "$2" --ncf-paper "$1/x"
}
paper_broken paper-pair "a pair that is not the user's test rating" test.negative 's/(1,3)/(1,2)/'
paper_broken paper-count "a line of another number of negatives" test.negative '3s/$/\t1/'
paper_broken paper-user "a test user not in train" test.rating 's/^2\t3/7\t3/'
paper_broken paper-fields "a training row of three fields" train.rating '2s/\t101$//'
paper "paper-missing" && rm paper-missing/x.test.negative
refused paper-missing 1 "a missing .test.negative" --ncf-paper paper-missing/x
paper paper-dir
refused paper-dir 1 "a directory for DIR/NAME: the NAME of its .train.rating" --ncf-paper paper-dir
# scripts/paper-split.sh over a CRLF MovieLens CSV (ml-latest-small's
# ratings.csv may come so): the files it writes hold no CR, the same as
# from LF lines
printf "$H\r\n$(printf "$R" | sed 's/$/\r/')\n" >in/crlf-ml.csv
printf "$H\n$R" >in/lf-ml.csv
sh "$NCF_ROOT/scripts/paper-split.sh" in/crlf-ml.csv crlf 1 &&
	sh "$NCF_ROOT/scripts/paper-split.sh" in/lf-ml.csv lf 1
is "$?:$(cat crlf.train.rating crlf.test.rating crlf.test.negative | tr -cd '\r' | wc -c | tr -d ' ')" "0:0" \
	"paper-split.sh over CRLF lines: no CR in its files"
cmp -s crlf.train.rating lf.train.rating && cmp -s crlf.test.rating lf.test.rating &&
	cmp -s crlf.test.negative lf.test.negative
ok $? "... the files of the same ratings with LF line ends"

done_testing
