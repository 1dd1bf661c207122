"""Math in exported BibTeX fields: kept only when it uses commands the LaTeX kernel defines and is
well formed, so an inserted entry never needs a package in the user's preamble (else the caller
writes its readable text). One pass over the math, bounded in length and depth: an adversarial
field cannot stall the language server.
"""

from __future__ import annotations

import re

from .tex_escape import MATH_COMMANDS, MATH_LITERAL

# An HTML / JATS / MathML tag (the source parser turns them into commands; math refuses them).
HTML_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:._-]*)((?:\s[^<>]*)?)(/?)>")

# -- math ----------------------------------------------------------------------------------------

# Math commands of the LaTeX kernel that take no argument.
_MATH_SYMBOLS = frozenset(
    set(MATH_COMMANDS.values()) - MATH_LITERAL
    | set(
        "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi "
        "varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi "
        "Pi Sigma Upsilon Phi Psi Omega".split()
    )
    | set(
        "le ge ne leq geq neq to gets infty cdot cdots ldots dots vdots ddots times div pm mp log ln lg exp "
        "sin cos tan min max sup inf lim liminf limsup arg det dim ker Pr bmod pmod gcd deg hom "
        "sum prod int oint bigcup bigcap bigvee bigwedge bigoplus bigotimes coprod langle rangle lceil "
        "rceil lfloor rfloor backslash prime emptyset nabla partial forall exists neg lnot land lor "
        "wedge vee cap cup setminus subset subseteq supset supseteq in ni notin sim simeq approx cong "
        "equiv propto perp parallel mid ll gg prec succ preceq succeq leftarrow rightarrow "
        "Leftarrow Rightarrow leftrightarrow Leftrightarrow uparrow downarrow mapsto longrightarrow "
        "Longrightarrow iff star ast circ bullet oplus otimes odot triangle triangleleft "
        "triangleright bigtriangleup bigtriangledown top bot vdash dashv models ell hbar Re Im aleph wp "
        "surd angle flat sharp natural clubsuit diamondsuit heartsuit spadesuit dagger ddagger amalg "
        "uplus sqcup sqcap sqsubseteq sqsupseteq bowtie smile frown doteq asymp colon quad qquad "
        "imath jmath cdotp ldotp".split()
    )
)
_MATH_ARG1: dict[str, str] = {
    **{
        c: c
        for c in (
            "hat",
            "tilde",
            "bar",
            "vec",
            "dot",
            "ddot",
            "acute",
            "grave",
            "check",
            "breve",
            "widehat",
            "widetilde",
            "overline",
            "underline",
            "mathrm",
            "mathbf",
            "mathit",
            "mathcal",
            "mathsf",
            "mathtt",
            "sqrt",
            "mbox",
        )
    },
    "mathbb": "mathbf",
    "bm": "mathbf",
    "boldsymbol": "mathbf",
    "text": "mathrm",
    "textrm": "mathrm",
    "textit": "mathit",
    "textbf": "mathbf",
    "operatorname": "mathrm",
    "mathscr": "mathcal",
    "mathfrak": "mathrm",
    "textsf": "mathsf",
    "texttt": "mathtt",
}
_MATH_ARG2 = frozenset({"frac"})
_MATH_ALIASES = {
    "eps": "epsilon",
    "implies": "Longrightarrow",
    "mod": "bmod",
    "Join": "bowtie",
    "leqslant": "leq",
    "geqslant": "geq",
    "rhd": "triangleright",
    "lhd": "triangleleft",
    "lvert": "|",
    "rvert": "|",
    "vert": "|",
    "Vert": "|",
    "dfrac": "frac",
    "tfrac": "frac",
    "varnothing": "emptyset",
    "lbrace": "{",
    "rbrace": "}",
}
_MATH_DROPPED = frozenset(
    "left right bigl bigr Bigl Bigr biggl biggr big Big displaystyle textstyle "
    "scriptstyle limits nolimits".split()
)
_MATH_PLAIN = frozenset("+-=<>()[]/,.;:!'*|?@ ")
_MAX_MATH = 2000
_MAX_MATH_DEPTH = 40


class _MathError(Exception):
    """The formula is not kernel math (or not well formed): it becomes text instead."""


def clean_math(content: str) -> str | None:
    """Inline math made safe for the LaTeX kernel, or None when it cannot be (then use its text).

    Kept: letters, digits, operators, kernel math commands with their arguments, ``^``/``_`` with an
    operand, balanced braces. Renamed: commands from amssymb & co. to kernel ones (``\\mathbb`` ->
    ``\\mathbf``, ``\\leqslant`` -> ``\\leq``). Dropped: ``\\left``/``\\right`` sizing. Rejected:
    unknown commands, double scripts, ``\\frac`` without two arguments, HTML, display math.
    """
    if len(content) > _MAX_MATH or "<" in content and HTML_TAG.search(content):
        return None
    try:
        out, pos = _math_run(content.replace("\n", " "), 0, 0)
    except _MathError:
        return None
    if pos != len(content) or not out.strip():
        return None
    return out.strip()


def _math_run(s: str, pos: int, depth: int) -> tuple[str, int]:
    """Math tokens from ``pos`` up to an unmatched ``}`` or the end: (normalised TeX, end index)."""
    if depth > _MAX_MATH_DEPTH:
        raise _MathError
    out: list[str] = []
    scripts: set[str] = set()  # ^ and _ already attached to the current atom
    n = len(s)
    while pos < n:
        c = s[pos]
        if c == "}":
            return "".join(out), pos
        if c in "^_":
            if c in scripts:
                raise _MathError  # "Double superscript"
            scripts.add(c)
            operand, pos = _math_operand(s, pos + 1, depth)
            out.append(c + operand)
            continue
        atom, pos = _math_atom(s, pos, depth)
        if atom.strip():
            scripts = set()
        out.append(atom)
    return "".join(out), pos


def _math_operand(s: str, pos: int, depth: int) -> tuple[str, int]:
    """One argument: a braced group, a single character or an argument-less command."""
    n = len(s)
    while pos < n and s[pos] == " ":
        pos += 1
    if pos >= n or s[pos] in "}^_$&#%":
        raise _MathError
    if s[pos] == "{":
        inner, end = _math_run(s, pos + 1, depth + 1)
        if end >= n:
            raise _MathError
        return "{" + inner + "}", end + 1
    atom, end = _math_atom(s, pos, depth)
    if atom.startswith("\\") and "{" in atom[2:]:  # x^\hat{a}: a command with arguments needs braces
        raise _MathError
    return atom, end


def _math_atom(s: str, pos: int, depth: int) -> tuple[str, int]:
    c = s[pos]
    if c == "{":
        inner, end = _math_run(s, pos + 1, depth + 1)
        if end >= len(s):
            raise _MathError
        return "{" + inner + "}", end + 1
    if c == "\\":
        return _math_command(s, pos, depth)
    if c.isascii() and (c.isalnum() or c in _MATH_PLAIN):
        return c, pos + 1
    if c == "~":
        return "~", pos + 1
    if c in "&#%":
        return "\\" + c, pos + 1
    if c in MATH_COMMANDS:
        cmd = MATH_COMMANDS[c]
        return (cmd if cmd in MATH_LITERAL else "\\" + cmd + " "), pos + 1
    raise _MathError


def _math_command(s: str, pos: int, depth: int) -> tuple[str, int]:
    n = len(s)
    j = pos + 1
    if j >= n:
        raise _MathError
    if not (s[j].isascii() and s[j].isalpha()):
        if s[j] in "{}":  # \lbrace: BibTeX would count the brace of \{
            return ("\\lbrace " if s[j] == "{" else "\\rbrace "), j + 1
        if s[j] in "|,;:! %&#$_":
            return "\\" + s[j], j + 1
        if s[j] == "\\":
            return " ", j + 1
        raise _MathError
    k = j
    while k < n and s[k].isascii() and s[k].isalpha():
        k += 1
    name = _MATH_ALIASES.get(s[j:k], s[j:k])
    if name in ("|", "{", "}"):
        return {"|": "|", "{": "\\lbrace ", "}": "\\rbrace "}[name], k
    if name in _MATH_DROPPED:
        return "", k
    if name in _MATH_SYMBOLS:
        return "\\" + name + " ", k
    if name in _MATH_ARG1 or name in _MATH_ARG2:
        cmd = _MATH_ARG1.get(name, name)
        opt = ""
        if cmd == "sqrt" and k < n and s[k] == "[":
            close = s.find("]", k)
            if close == -1 or not s[k + 1 : close].isalnum():
                raise _MathError
            opt, k = s[k : close + 1], close + 1
        args = []
        for _ in range(2 if name in _MATH_ARG2 else 1):
            arg, k = _math_operand(s, k, depth)
            args.append(arg if arg.startswith("{") else "{" + arg.strip() + "}")
        return "\\" + cmd + opt + "".join(args), k
    raise _MathError
