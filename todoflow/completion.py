"""`todoflow completion bash|zsh|fish`: shell completion generated from the CLI's own parser.

Every verb and option comes from `cli.build_parser()` when the script is printed, so the
completion never drifts from the command line. What an argument takes is read from its
argparse action: its choices, or else its metavar — a workflow (`FILE` as a positional,
`OLD` and `NEW`: `.todoflow` files and folders), a run (`PROCESS_ID`, `RUN`: the ids of
the runs at the store location the line names), a folder (`...DIR`), a file (`FILE`,
`PLAN.json`, ...), an agent (`human`, `llm`, `scripted:` and a replies file), or free
text. Run ids are
listed at completion time by the hidden verb `todoflow __complete runs [--run-dir DIR]
[--store URL]`, which prints one id a line and never an error.

bash and zsh share one completion function (zsh runs it through `bashcompinit`); fish
gets `complete` commands of its own.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from todoflow.cli import HELPER


@dataclass(frozen=True)
class Argument:
    kind: str  # workflow, run, dir, file, agent, choice, text, flag
    choices: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()  # an option's spellings; empty for a positional
    many: bool = False  # a positional taking several values
    help: str = ""


@dataclass(frozen=True)
class Verb:
    name: str
    help: str
    options: tuple[Argument, ...]
    positionals: tuple[Argument, ...] = field(default=())


def _kind(action: argparse.Action) -> str:
    metavar = str(action.metavar or "")
    if action.nargs == 0:
        return "flag"
    if action.choices:
        return "choice"
    if metavar in ("PROCESS_ID", "RUN"):
        return "run"
    if metavar == "AGENT":
        return "agent"
    if metavar.endswith("DIR"):
        return "dir"
    if (metavar == "FILE" and not action.option_strings) or metavar in ("OLD", "NEW"):
        return "workflow"
    if metavar == "FILE" or "." in metavar:
        return "file"
    return "text"


def _argument(action: argparse.Action) -> Argument:
    text = "" if action.help in (None, argparse.SUPPRESS) else str(action.help)
    return Argument(
        _kind(action),
        tuple(str(c) for c in action.choices or ()),
        tuple(action.option_strings),
        action.nargs in ("+", "*"),
        text.replace("%(default)s", str(action.default)),
    )


def _options(parser: argparse.ArgumentParser) -> tuple[Argument, ...]:
    return tuple(_argument(a) for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS)


def verbs(parser: argparse.ArgumentParser) -> tuple[Verb, ...]:
    """The verbs of the CLI, with what each of their arguments takes."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: str(c.help or "") for c in commands._choices_actions}
    found = []
    for name, sub in commands.choices.items():
        positionals = tuple(_argument(a) for a in sub._actions if not a.option_strings)
        found.append(Verb(name, helps.get(name, ""), _options(sub), positionals))
    return tuple(found)


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    if shell == "fish":
        return _fish(parser)
    body = _bash(parser)
    if shell == "bash":
        return "# todoflow completion for bash: `source <(todoflow completion bash)` in ~/.bashrc\n" + body
    return (
        "#compdef todoflow\n"
        "# todoflow completion for zsh: `source <(todoflow completion zsh)` in ~/.zshrc, after compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + body
    )


# -- bash (and zsh through bashcompinit) ---------------------------------------------


def _words(items: Sequence[str]) -> str:
    return shlex.quote(" ".join(items))


def _bash(parser: argparse.ArgumentParser) -> str:
    table = verbs(parser)
    lines = [
        f"_todoflow_verbs={_words([v.name for v in table])}",
        f"_todoflow_global={_words([f for o in _options(parser) for f in o.flags])}",
        "",
        "_todoflow_spec() {  # VERB WHAT: the verb's options, valued options, or an argument's kind",
        '    case "$1 $2" in',
    ]
    for verb in table:
        flags = [f for o in verb.options for f in o.flags]
        valued = [f for o in verb.options if o.kind != "flag" for f in o.flags]
        lines.append(f'        "{verb.name} options") echo {_words(flags)} ;;')
        lines.append(f'        "{verb.name} valued") echo {_words(valued)} ;;')
        for option in verb.options:
            if option.kind != "flag":
                for flag in option.flags:
                    lines.append(f'        "{verb.name} {flag}") echo {_words(_kind_word(option))} ;;')
        for index, positional in enumerate(verb.positionals):
            lines.append(f'        "{verb.name} {index}") echo {_words(_kind_word(positional))} ;;')
        if verb.positionals and verb.positionals[-1].many:
            last = len(verb.positionals) - 1
            lines.append(
                f'        "{verb.name} "[0-9]*) echo {_words(_kind_word(verb.positionals[last]))} ;;'
            )
    lines += ["    esac", "}", "", _BASH_FUNCTION]
    return "\n".join(lines) + "\n"


def _kind_word(argument: Argument) -> list[str]:
    return ["choice", *argument.choices] if argument.kind == "choice" else [argument.kind]


_BASH_FUNCTION = r"""_todoflow_location() {  # the store options written on the line, for the run ids
    local i
    for ((i = 1; i < ${#COMP_WORDS[@]}; i++)); do
        case ${COMP_WORDS[i]} in
            --run-dir|--store) printf '%s\n%s\n' "${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}" ;;
        esac
    done
}

_todoflow_values() {  # KIND CURRENT: the candidates, one a line
    local kind=$1 cur=$2 IFS=$' \t\n'
    case $kind in
        choice\ *) compgen -W "${kind#choice }" -- "$cur" ;;
        workflow)
            compgen -d -- "$cur"
            compgen -f -X '!*.todoflow' -- "$cur" | while read -r name; do
                [[ -d $name ]] || echo "$name"  # a folder named *.todoflow is listed once, above
            done ;;
        file) compgen -f -- "$cur" ;;
        dir) compgen -d -- "$cur" ;;
        agent)
            if [[ $cur == scripted:* ]]; then
                compgen -f -P scripted: -- "${cur#scripted:}"
            else
                compgen -W 'human llm scripted:' -- "$cur"
            fi ;;
        run)
            local IFS=$'\n'
            local -a location=($(_todoflow_location))
            compgen -W "$("${COMP_WORDS[0]}" __complete runs "${location[@]}" 2>/dev/null)" -- "$cur" ;;
    esac
}

_todoflow_compopt() {  # bash's compopt; zsh's bashcompinit has none
    type compopt &>/dev/null && compopt "$@" 2>/dev/null
}

_todoflow() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local IFS=$'\n' verb="" at=0 i word
    # bash splits `--format=json` and `scripted:r.yaml` at `=` and `:` (COMP_WORDBREAKS)
    if [[ ($cur == : && $prev == scripted) || ($prev == : && ${COMP_WORDS[COMP_CWORD-2]} == scripted) ]]; then
        [[ $cur == : ]] && cur=""
        _todoflow_compopt -o filenames
        COMPREPLY=($(_todoflow_values file "$cur"))
        return 0
    fi
    if [[ $cur == = ]]; then cur=""; fi
    if [[ $prev == = && $COMP_CWORD -ge 2 ]]; then prev=${COMP_WORDS[COMP_CWORD-2]}; fi
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ $word != -* ]]; then verb=$word; at=$i; break; fi
    done
    if [[ -z $verb ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(_todoflow_values "choice $_todoflow_global" "$cur"))
        else
            COMPREPLY=($(_todoflow_values "choice $_todoflow_verbs" "$cur"))
        fi
        return 0
    fi
    local valued=" $(_todoflow_spec "$verb" valued) " kind=""
    if [[ $prev == -* && $valued == *" $prev "* ]]; then
        kind=$(_todoflow_spec "$verb" "$prev")
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(_todoflow_values "choice $(_todoflow_spec "$verb" options)" "$cur"))
        return 0
    else
        local n=0 skip=0
        for ((i = at + 1; i < COMP_CWORD; i++)); do
            word=${COMP_WORDS[i]}
            if ((skip)); then [[ $word == [=:] ]] || skip=0; continue; fi
            case $word in
                [=:]) skip=1 ;;  # the rest of a word bash split: `--opt=value`, `scripted:FILE`
                -*=*) ;;
                -*) [[ $valued == *" $word "* ]] && skip=1 ;;
                *) ((n++)) ;;
            esac
        done
        kind=$(_todoflow_spec "$verb" "$n")
    fi
    [[ -n $kind ]] || return 0
    case $kind in
        workflow|file|dir) _todoflow_compopt -o filenames ;;
        agent) _todoflow_compopt -o nospace ;;
    esac
    COMPREPLY=($(_todoflow_values "$kind" "$cur"))
    return 0
}

complete -F _todoflow todoflow"""


# -- fish ----------------------------------------------------------------------------

_FISH_VALUES = {
    "workflow": "-r -a '(__fish_complete_suffix .todoflow)'",
    "file": "-r -F",
    "dir": "-x -a '(__fish_complete_directories)'",
    "run": "-x -a '(__todoflow_runs)'",
    "agent": "-x -a 'human llm scripted:(__fish_complete_suffix .yaml)'",
    "text": "-x",
}

_FISH_HEAD = r"""# todoflow completion for fish:
#   todoflow completion fish > ~/.config/fish/completions/todoflow.fish
function __todoflow_runs --description 'the run ids at the store location the line names'
    set -l tokens (commandline -opc)
    set -l location
    for i in (seq (count $tokens))
        if contains -- $tokens[$i] --run-dir --store; and test $i -lt (count $tokens)
            set location $location $tokens[$i] $tokens[(math $i + 1)]
        end
    end
    $tokens[1] __complete runs $location 2>/dev/null
end

complete -c todoflow -f"""


def _fish_option(condition: str, option: Argument) -> str:
    spelled = " ".join(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}" for f in option.flags)
    if option.kind == "flag":
        values = ""
    elif option.kind == "choice":
        values = f"-x -a {shlex.quote(' '.join(option.choices))}"
    else:
        values = _FISH_VALUES[option.kind]
    parts = ["complete -c todoflow", condition, spelled, values, f"-d {_fish_text(option.help)}"]
    return " ".join(p for p in parts if p)


def _fish_text(text: str) -> str:
    shown = " ".join(text.replace("`", "").split())
    return shlex.quote(shown if len(shown) <= 80 else shown[:79] + "…")


def _fish(parser: argparse.ArgumentParser) -> str:
    table = verbs(parser)
    lines = [_FISH_HEAD]
    for option in _options(parser):
        lines.append(_fish_option("-n __fish_use_subcommand", option))
    for verb in table:
        lines.append(
            f"complete -c todoflow -n __fish_use_subcommand -a {verb.name} -d {_fish_text(verb.help)}"
        )
        condition = f"-n '__fish_seen_subcommand_from {verb.name}'"
        lines += [_fish_option(condition, option) for option in verb.options]
        for positional in verb.positionals:
            if positional.kind == "choice":
                lines.append(
                    f"complete -c todoflow {condition} -a {shlex.quote(' '.join(positional.choices))}"
                )
            elif positional.kind in ("workflow", "run", "dir", "file"):
                values = _FISH_VALUES[positional.kind].replace("-r ", "").replace("-x ", "")
                lines.append(f"complete -c todoflow {condition} {values}")
    return "\n".join(lines) + "\n"


# -- the hidden helper ---------------------------------------------------------------


def helper(argv: Sequence[str]) -> int:
    """`todoflow __complete runs [--run-dir DIR] [--store URL]`: the run ids there, one a
    line. A completion must never print an error into the shell: any problem (no such
    folder, no database driver, an unreachable database) lists nothing."""
    if list(argv[:1]) != ["runs"]:
        return 0
    parser = argparse.ArgumentParser(prog=f"todoflow {HELPER}", add_help=False)
    parser.add_argument("--run-dir")
    parser.add_argument("--store")
    args, _ = parser.parse_known_args(argv[1:])
    from todoflow import runs
    from todoflow.runtime.store.base import runs_at

    try:
        found = runs_at(runs.where(args))
        try:
            ids = sorted(process_id for process_id, _ in found.metas())
        finally:
            found.close()
    except Exception:  # completion must stay silent, whatever went wrong
        return 0
    sys.stdout.write("".join(f"{process_id}\n" for process_id in ids))
    return 0
