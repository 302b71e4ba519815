package cli

// completionScripts are the scripts of `shaperctl completion SHELL`. Each
// asks `shaperctl __complete -- WORDS...` (the program as typed, so a
// shaperctl outside $PATH completes too) and shows what it prints; a last
// line ":file" adds file names.
var completionScripts = map[string]string{
	"bash": `# bash completion for shaperctl (shaperctl completion bash)
_shaperctl() {
    local -a words=() out=()
    local i w cword=0 colon=0 equals=0
    [[ $COMP_WORDBREAKS == *:* ]] && colon=1
    [[ $COMP_WORDBREAKS == *=* ]] && equals=1
    # Bash splits tier:gold at the colon and --socket=PATH at the equals
    # sign; put such words together again.
    for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
        w=${COMP_WORDS[i]}
        if ((i > 0)) && { { ((colon)) && [[ $w == : || ${COMP_WORDS[i-1]} == : ]]; } ||
            { ((equals)) && [[ $w == = || ${COMP_WORDS[i-1]} == = ]]; }; }; then
            words[${#words[@]}-1]+=$w
        else
            words+=("$w")
        fi
        ((i == COMP_CWORD)) && cword=$((${#words[@]} - 1))
    done
    local cur=${words[cword]}
    mapfile -t out < <("${words[0]}" __complete -- "${words[@]:1:cword}" 2>/dev/null)
    COMPREPLY=()
    if ((${#out[@]})) && [[ ${out[${#out[@]}-1]} == :file ]]; then
        unset 'out[${#out[@]}-1]'
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    COMPREPLY+=("${out[@]}")
    # Bash replaces only the part after the last colon.
    if ((colon)) && [[ $cur == *:* ]]; then
        local pre=${cur%"${cur##*:}"}
        COMPREPLY=("${COMPREPLY[@]#"$pre"}")
    fi
}
complete -F _shaperctl shaperctl
`,
	"zsh": `#compdef shaperctl
# zsh completion for shaperctl (shaperctl completion zsh)
_shaperctl() {
    local -a out
    out=("${(@f)$(${words[1]} __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    out=(${out:#})
    if (( ${#out} )) && [[ ${out[-1]} == :file ]]; then
        out[-1]=()
        _files
    fi
    (( ${#out} )) && compadd -- "${out[@]}"
    return 0
}
if [ "$funcstack[1]" = "_shaperctl" ]; then
    _shaperctl "$@"
else
    compdef _shaperctl shaperctl
fi
`,
	"fish": `# fish completion for shaperctl (shaperctl completion fish)
function __shaperctl_complete
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l prog $tokens[1]
    set -e tokens[1]
    set -l out ($prog __complete -- $tokens "$cur" 2>/dev/null)
    if test (count $out) -gt 0; and test "$out[-1]" = ":file"
        set -e out[-1]
        __fish_complete_path "$cur"
    end
    printf '%s\n' $out
end
complete -c shaperctl -f -a '(__shaperctl_complete)'
`,
}
