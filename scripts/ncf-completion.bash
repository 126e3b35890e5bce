# ncf-completion.bash - bash completion for ncf-prep, ncf-train, ncf-eval
# and ncf-infer.  make install puts it in
# PREFIX/share/bash-completion/completions under each tool's name, where
# bash-completion finds it; or source it.
#
# The options come from the tool's own --help (so they are the ones the
# installed tool takes); the values of the options that name a choice
# are listed here; files are completed by what each option and operand
# takes: caches (*.ncfc), models (*.ncfm, *.safetensors), ratings.

# _ncf_files GLOB...: the files matching any GLOB, and directories
_ncf_files() {
	local cur=$1 g
	shift
	local IFS=$'\n'
	COMPREPLY=($(compgen -d -- "$cur"))
	for g in "$@"; do
		COMPREPLY+=($(compgen -f -X "!$g" -- "$cur"))
	done
}

_ncf() {
	local cmd=${COMP_WORDS[0]##*/} cur=${COMP_WORDS[COMP_CWORD]} prev=
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
	COMPREPLY=()
	case $prev in
	--device) COMPREPLY=($(compgen -W "auto cpu cuda" -- "$cur")); return ;;
	--precision) COMPREPLY=($(compgen -W "fp32 tf32 bf16 fp16" -- "$cur")); return ;;
	--format) COMPREPLY=($(compgen -W "ml-20m ml-25m ml-latest ml-1m ml-10m ml-100k csv" -- "$cur")); return ;;
	--synthetic) COMPREPLY=($(compgen -W "tiny ml-latest-small ml-100k ml-1m ml-10m ml-20m ml-25m" -- "$cur")); return ;;
	--baseline) COMPREPLY=($(compgen -W "popularity" -- "$cur")); return ;;
	--export-format) COMPREPLY=($(compgen -W "onnx safetensors" -- "$cur")); return ;;
	-m | --model | --resume) _ncf_files "$cur" '*.ncfm' '*.ncfm.last' '*.ncfm.epoch-*' '*.safetensors'; return ;;
	--exclude-seen | --ids | --info) _ncf_files "$cur" '*.ncfc'; return ;;
	-o | --output | --checkpoint | --log | --export | --scores) _ncf_files "$cur" '*'; return ;;
	-e | --epochs | -b | --batch-size | --batch-sizes | -f | --factors | --layers | -n | \
	--negative-samples | -l | --learning-rate | --beta1 | --beta2 | --eps | --dropout | -s | \
	--seed | -t | --threshold | -k | --topk | --threads | --warmup | --iterations | --users | \
	--items | --recommend | --min-ratings | --eval-negatives | -S | --buffer-size)
		return ;; # a number: nothing to offer
	esac
	if [[ $cur == -* ]]; then
		local opts
		# the option list of --help: lines "  -x, --long ARG  what" or "  --long"
		opts=$("$1" --help 2>/dev/null |
			sed -n 's/^  *\(-[A-Za-z0-9], \)\{0,1\}\(--[A-Za-z0-9][A-Za-z0-9_-]*\).*/\1 \2/p' |
			tr -d ',')
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	case $cmd in
	ncf-prep) _ncf_files "$cur" '*.csv' '*.dat' '*.data' '*.tsv' ;;
	ncf-train | ncf-eval) _ncf_files "$cur" '*.ncfc' ;;
	*) _ncf_files "$cur" '*' ;;
	esac
}
complete -F _ncf ncf-prep ncf-train ncf-eval ncf-infer
