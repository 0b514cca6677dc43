"""`nsight-tui completion bash|zsh`: a shell completion script, written from the parsers themselves.

The script is static text (no Python run on each <TAB>): subcommands in the first place, each
subcommand's options after it, and file names everywhere else.
"""
from __future__ import annotations

from typing import Callable

BASH = """# nsight-tui completion for bash: eval "$(nsight-tui completion bash)"
_nsight_tui() {
    local cur="${COMP_WORDS[COMP_CWORD]}" sub="${COMP_WORDS[1]}" opts
    if [ "$COMP_CWORD" -eq 1 ] && [ "${cur#-}" = "$cur" ]; then
        COMPREPLY=( $(compgen -W "%(subcommands)s" -- "$cur") $(compgen -f -- "$cur") )
        return
    fi
    case "$sub" in
%(cases)s
        *) opts="%(open)s" ;;
    esac
    if [ "${cur#-}" != "$cur" ]; then
        COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
    else
        COMPREPLY=( $(compgen -f -- "$cur") )
    fi
}
complete -o filenames -F _nsight_tui nsight-tui
"""


def script(shell: str, subcommands: dict, options: Callable[[str], list[str]]) -> str | None:
    """The completion script for `shell` (bash, or zsh through its bash compatibility); None for others."""
    if shell not in ("bash", "zsh"):
        return None
    cases = "\n".join(f'        {name}) opts="{" ".join(options(name))}" ;;' for name in subcommands)
    text = BASH % {"subcommands": " ".join([*subcommands, "help", "open"]), "cases": cases,
                   "open": " ".join(options("open"))}
    if shell == "zsh":
        text = "autoload -U +X bashcompinit && bashcompinit\n" + text.replace("for bash", "for zsh", 1)
    return text
