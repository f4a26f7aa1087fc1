r"""A finished run as a LaTeX table for a paper's appendix (``icl-verify show RUN --format latex``).

:func:`latex_table` writes a ``booktabs`` table: one row per claim with its id, short statement
(the claim's title), verdict, *deciding number* ± its standard error, and that number's ``n``.
The deciding number is the first number of the claim's deciding tier: the last tier that ran
whose verdict equals the claim's verdict (:func:`sim.show.deciding_number`).

Every finding whose verdict is not PASS (a FAILing or INCONCLUSIVE other reading, see docs/findings.md) gets a note: a marker ``\textsuperscript{a}`` in the claim's verdict cell and the
note itself in a list below the ``tabular`` (``\footnote`` inside a ``tabular`` is lost, and
``threeparttable`` is not needed): the table needs only ``booktabs``.

Every text from the results is escaped (``\ & % $ # _ { } ~ ^ < > |`` and more), and the output is
plain ASCII: the unicode the claims use (``±``, ``≈``, ``→``, ``≤``, Greek letters, sub- and
superscript digits) becomes math (``\ensuremath{\pm}``), dashes and quotes become their LaTeX
forms, accented letters become accent commands, and any other character is written as
``[U+XXXX]``; so the table compiles whatever the paper's input encoding is.
"""
from __future__ import annotations

import math
import re
import unicodedata

__all__ = ["latex_escape", "latex_table", "note_marker"]

_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
    ">": r"\textgreater{}", "|": r"\textbar{}", "[": "{[}", "]": "{]}", '"': "''", "`": "{`}",
    "\n": " ", "\r": " ", "\t": " ",
}

_MATH = {
    "±": r"\pm", "∓": r"\mp", "≈": r"\approx", "→": r"\to", "←": r"\leftarrow", "↔": r"\leftrightarrow",
    "⇒": r"\Rightarrow", "⇐": r"\Leftarrow", "⇔": r"\Leftrightarrow", "↦": r"\mapsto", "≤": r"\le",
    "≥": r"\ge", "≠": r"\neq", "≡": r"\equiv", "∼": r"\sim", "≃": r"\simeq", "≅": r"\cong", "∝": r"\propto",
    "≪": r"\ll", "≫": r"\gg", "×": r"\times", "÷": r"\div", "·": r"\cdot", "⋅": r"\cdot", "∘": r"\circ",
    "∞": r"\infty", "∈": r"\in", "∉": r"\notin", "⊂": r"\subset", "⊆": r"\subseteq", "⊃": r"\supset",
    "⊇": r"\supseteq", "∩": r"\cap", "∪": r"\cup", "∅": r"\emptyset", "∑": r"\sum", "∏": r"\prod",
    "√": r"\surd", "∂": r"\partial", "∇": r"\nabla", "∀": r"\forall", "∃": r"\exists", "¬": r"\neg",
    "∧": r"\wedge", "∨": r"\vee", "‖": r"\|", "⊥": r"\perp", "′": r"\prime", "°": r"^\circ", "µ": r"\mu",
    "ℓ": r"\ell", "ℝ": r"\mathbf{R}", "ℕ": r"\mathbf{N}", "ℤ": r"\mathbf{Z}", "∣": r"\mid", "⊗": r"\otimes",
    "⊕": r"\oplus", "⟨": r"\langle", "⟩": r"\rangle", "−": "-",
}
_GREEK = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
          "sigma tau upsilon phi chi psi omega").split()
for _i, _name in enumerate(_GREEK):
    _lower = chr(0x3B1 + _i + (1 if _i >= 17 else 0))  # U+03C2 (final sigma) sits between rho and sigma
    _MATH[_lower] = "o" if _name == "omicron" else "\\" + _name
    if _name in ("gamma", "delta", "theta", "lambda", "xi", "pi", "sigma", "upsilon", "phi", "psi", "omega"):
        _MATH[chr(ord(_lower) - 0x20)] = "\\" + _name.capitalize()
_MATH["ς"] = r"\varsigma"
_MATH["ϵ"] = r"\epsilon"
_MATH["ε"] = r"\varepsilon"
_MATH["φ"] = r"\varphi"
for _k, _c in enumerate("₀₁₂₃₄₅₆₇₈₉"):
    _MATH[_c] = "_{%d}" % _k
for _k, _c in enumerate("⁰¹²³⁴⁵⁶⁷⁸⁹"):
    _MATH[_c] = "^{%d}" % _k
_MATH.update({"ᵢ": "_{i}", "ⱼ": "_{j}", "ₖ": "_{k}", "ₙ": "_{n}", "ₜ": "_{t}", "ᵀ": "^{T}", "⁻": "^{-}", "⁺": "^{+}"})

_TEXT = {
    "—": "---", "–": "--", "…": r"\ldots{}", "‘": "`", "’": "'", "“": "``", "”": "''", "•": r"\textbullet{}",
    "§": r"\S{}", "¶": r"\P{}", "\u00a0": "~", "ß": r"\ss{}", "æ": r"\ae{}", "Æ": r"\AE{}", "ø": r"\o{}",
    "Ø": r"\O{}", "œ": r"\oe{}", "Œ": r"\OE{}", "ł": r"\l{}", "Ł": r"\L{}", "ı": r"\i{}", "©": r"\copyright{}",
    "✓": "yes", "✗": "no",
}
_ACCENTS = {"\u0301": "'", "\u0300": "`", "\u0302": "^", "\u0308": '"', "\u0303": "~", "\u0304": "=",
            "\u0307": ".", "\u0327": "c", "\u030c": "v", "\u0306": "u", "\u030a": "r", "\u030b": "H", "\u0328": "k"}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _accented(ch: str) -> str | None:
    """An accented Latin letter as a LaTeX accent command (``é`` -> ``\\'{e}``), else None."""
    parts = unicodedata.normalize("NFD", ch)
    if len(parts) < 2 or not parts[0].isascii() or not parts[0].isalpha():
        return None
    out = parts[0]
    for mark in parts[1:]:
        if mark not in _ACCENTS:
            return None
        out = "\\%s{%s}" % (_ACCENTS[mark], out)
    return out


def latex_escape(text) -> str:
    """``text`` as LaTeX text-mode source: specials escaped, plain ASCII (see the module docstring)."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "" if text is None else str(text))
    out = []
    prev = ""
    for ch in text:
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch == "-" and prev == "-":  # keep "--" two hyphens, not an en dash
            out.append("{}-")
        elif ch.isascii():
            out.append(ch)
        elif ch in _MATH:
            out.append(r"\ensuremath{%s}" % _MATH[ch])
        elif ch in _TEXT:
            out.append(_TEXT[ch])
        else:
            out.append(_accented(ch) or f"[U+{ord(ch):04X}]")
        prev = ch
    return "".join(out)


def note_marker(k: int) -> str:
    """The k-th note's marker (0-based): a, b, ..., z, aa, ab, ..."""
    s = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        s = chr(ord("a") + r) + s
    return s


_E_FORM = re.compile(r"^(-?[0-9.]+)e([+-]?[0-9]+)$")


def _math_num(x) -> str:
    """A number from results.json as math-mode source (``1.2e-05`` -> ``1.2 \\times 10^{-5}``)."""
    from sim.report import _fmt_num

    if x is None:
        return r"\mbox{---}"
    if isinstance(x, bool):
        return r"\mbox{%s}" % x
    if isinstance(x, str):
        low = x.strip().lower()
        if low in ("inf", "+inf", "infinity"):
            return r"\infty"
        if low in ("-inf", "-infinity"):
            return r"-\infty"
        if low == "nan":
            return r"\mbox{NaN}"
        return r"\mbox{%s}" % latex_escape(x)
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return _math_num("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))
    text = _fmt_num(x)
    m = _E_FORM.match(text)
    if m:
        mantissa = m.group(1).rstrip("0").rstrip(".") if "." in m.group(1) else m.group(1)
        return r"%s \times 10^{%d}" % (mantissa, int(m.group(2)))
    return text


def _number_cell(num: dict | None) -> str:
    from sim.show import has_error

    if num is None:
        return "---"
    value = _math_num(num.get("value"))
    if has_error(num):
        cell = "$%s \\pm %s$" % (value, _math_num(num.get("stderr")))
    else:
        cell = "$%s$" % value + (" (exact)" if num.get("kind") == "exact" else "")
    return r"\raggedright %s: %s" % (latex_escape(num.get("name", "")), cell)


def _n_cell(num: dict | None) -> str:
    if num is None or num.get("n") is None:
        return "---"
    n = num["n"]
    return str(n) if isinstance(n, int) and not isinstance(n, bool) else latex_escape(n)


def _verdict_cell(verdict: str, marks: str) -> str:
    """The verdict (and its note markers); ASSUMPTION_UNMET on two lines, to keep the column narrow."""
    if "_" in verdict and len(verdict) > 12:
        head, tail = verdict.split("_", 1)
        return r"\parbox[t]{7.5em}{\raggedright %s\_\allowbreak %s%s}" % (latex_escape(head), latex_escape(tail),
                                                                           marks)
    return latex_escape(verdict) + marks


def latex_table(doc: dict, standalone: bool = False) -> str:
    r"""A results.json document as a booktabs ``table`` (with ``standalone``: a whole document).

    Columns: claim id, short statement (the title), verdict, the deciding number ± its standard
    error, and its n. The deciding number of a claim is the first number of its deciding tier,
    the last tier that ran whose verdict equals the claim's verdict; a claim without one (not
    run, crashed, or a tier without numbers) shows ``---``. Each finding whose verdict is not PASS
    adds a marker to the claim's verdict and a note below the tabular (tier, kind, reading, its
    verdict, evidence). The fragment needs ``\usepackage{booktabs}`` only; the standalone form
    compiles as it is with ``pdflatex``."""
    from sim.show import deciding_number

    cfg = doc.get("config") or {}
    rows, notes = [], []
    for d in doc["claims"]:
        markers = []
        for t in d.get("tiers") or []:
            for f in t.get("findings") or []:
                if f.get("verdict") == "PASS":
                    continue
                mark = note_marker(len(notes))
                markers.append(mark)
                notes.append((mark, d["id"], t.get("tier", ""), f))
        verdict = _verdict_cell(d["verdict"], r"\textsuperscript{%s}" % ",".join(markers) if markers else "")
        num = deciding_number(d)
        rows.append(" & ".join([latex_escape(d["id"]), r"\raggedright " + latex_escape(d.get("title", "")), verdict,
                                _number_cell(num), _n_cell(num)]) + r" \\")

    commit = doc.get("git_commit")
    caption = (r"Claims checked by icl-verify (run \texttt{%s}, profile %s, seed %s%s). The deciding number is the "
               r"first number of the last tier whose verdict is the claim's verdict, $\pm$ one standard error."
               % (latex_escape(doc.get("run_id", "")), latex_escape(cfg.get("profile", "")),
                  latex_escape(cfg.get("seed", "")), ", commit \\texttt{%s}" % latex_escape(commit[:12])
                  if commit else ""))
    out = [f"% icl-verify show --format latex: run {_comment(doc.get('run_id', ''))}; needs \\usepackage{{booktabs}}",
           r"\begin{table}[htbp]", r"\centering", r"\caption{%s}" % caption, r"\label{tab:icl-verify}",
           r"\medskip", r"\begingroup\footnotesize\setlength{\tabcolsep}{4pt}",
           r"\begin{tabular}{@{}l p{0.27\linewidth} l p{0.21\linewidth} r@{}}", r"\toprule",
           r"Claim & Statement & Verdict & Deciding number & $n$ \\", r"\midrule", *rows, r"\bottomrule",
           r"\end{tabular}"]
    if notes:
        out += [r"\par\medskip", r"\begin{minipage}{\linewidth}\raggedright"]
        for mark, cid, tier, f in notes:
            out.append(r"\textsuperscript{%s}\,%s, tier %s, \emph{%s}: %s --- %s: %s\par"
                       % (mark, latex_escape(cid), latex_escape(tier), latex_escape(f.get("kind", "")),
                          latex_escape(f.get("reading", "")), latex_escape(f.get("verdict", "")),
                          latex_escape(f.get("detail", ""))))
        out.append(r"\end{minipage}")
    out += [r"\endgroup", r"\end{table}"]
    body = "\n".join(out) + "\n"
    if not standalone:
        return body
    return ("\\documentclass{article}\n\\usepackage[utf8]{inputenc}\n\\usepackage{booktabs}\n"
            "\\begin{document}\n" + body + "\\end{document}\n")


def _comment(text) -> str:
    """Text for a ``%`` comment line: one line, ASCII."""
    return latex_escape(text).replace("\n", " ")
