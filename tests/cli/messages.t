#!/usr/bin/env bash
# messages.t - the texts that are contracts, each compared with its copy
# under tests/expected/: every tool's --help (stdout, exit 0, nothing on
# stderr), and ncf-prep --info of caches made from fixed input (a
# synthetic one and a small CSV), the key<TAB>value lines scripts parse.
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

done_testing
