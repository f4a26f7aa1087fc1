"""`icl-verify show RUN --format text|md|json|latex`: the deciding number, LaTeX escaping and a
well-formed booktabs table (compiled with pdflatex where one is installed), JSON and Markdown forms.

The results documents are built by hand; no claim runs here."""
import json
import re
import shutil
import subprocess

import pytest

from sim.cli import main
from sim.latex import latex_escape, latex_table, note_marker
from sim.report import SCHEMA, render_markdown, summary_table, summary_table_markdown
from sim.show import claims_summary, deciding_number, deciding_tier

SPECIALS = "\\ & % $ # _ { } ~ ^"
EVIL_TITLE = f"Bound {SPECIALS} <x> |y| [z] \"q\" -- ± ≈ → α ≤ é ∑ — ok"


def _num(name, value, stderr=0.0, n=None, kind="montecarlo"):
    return {"name": name, "value": value, "stderr": stderr, "n": n, "seed": 1, "tolerance": None, "kind": kind,
            "note": ""}


def _tier(tier, verdict, numbers=(), findings=()):
    return {"tier": tier, "verdict": verdict, "conclusion": "held", "summary": f"{tier} said {verdict}",
            "assumptions": [], "numbers": list(numbers), "counterexample": None, "readings": [],
            "findings": list(findings), "controls": [], "figures": [], "budget": None, "elapsed_s": 0.1,
            "error": None}


def _finding(verdict, detail, reading="the literal statement"):
    return {"kind": "literal statement", "reading": reading, "verdict": verdict, "detail": detail, "numbers": [],
            "counterexample": None}


def _claim(cid, verdict, tiers, title="A claim", headline=None):
    return {"id": cid, "title": title, "paper": "T", "source": "T §1", "statement": "s", "verdict": verdict,
            "headline": headline or verdict, "tiers_supported": [t["tier"] for t in tiers] or ["trained"],
            "decided_by": "standard", "primary_reading": {}, "seed": 3, "config_hash": "h", "elapsed_s": 0.5,
            "note": "", "tiers": tiers}


def _doc():
    claims = [
        _claim("T.EVIL_1", "PASS", [
            _tier("exact", "PASS", [_num("max |x|_2 ≤ 1 & 50% of $#", 1.5e-07, 0.0, kind="exact")]),
            _tier("property", "PASS", [_num("examples", 150, kind="property")], findings=[
                _finding("FAIL", f"fails on 15.7% of {SPECIALS} prompts → bad"),
                _finding("PASS", "holds too (no note for a PASS)"),
                _finding("INCONCLUSIVE", "undecided at n = 10^4", reading="stricter: I(x;y) < b")])],
            title=EVIL_TITLE, headline="PASS (finding: the exact identity fails on 15.7% of prompts)"),
        _claim("T.FAIL", "FAIL", [
            _tier("exact", "FAIL", [_num("first failing", 7.0, kind="exact")]),
            _tier("montecarlo", "FAIL", [_num("E[gap]", 0.25, 0.01, 1000), _num("second", 9.0)]),
            _tier("trained", "PASS", [_num("loss", 0.1, 0.02, 64)])]),
        _claim("T.INF", "INCONCLUSIVE", [_tier("montecarlo", "INCONCLUSIVE", [_num("ratio", "inf", 0.5, 20)])]),
        _claim("T.NOTRUN", "NOT_RUN", []),
        _claim("T.ERR", "ERROR", []),
        _claim("T.NONUM", "ASSUMPTION_UNMET", [_tier("exact", "ASSUMPTION_UNMET")]),
    ]
    return {"schema": SCHEMA, "run_id": "quick-seed0-abc_1", "complete": True, "created": "2024-01-01T00:00:00",
            "config": {"profile": "quick", "claims": "T.*", "seed": 0, "device": "cpu", "z": 3.0, "prior": None},
            "config_hash": "x", "seeds": {"master": 0, "claims": {}}, "prior": None, "versions": {"python": "3"},
            "git_commit": "0123456789abcdef+dirty", "platform": "p", "elapsed_s": 1.0,
            "summary": {"PASS": 1, "FAIL": 1, "INCONCLUSIVE": 1, "NOT_RUN": 1, "ERROR": 1, "ASSUMPTION_UNMET": 1},
            "findings": [], "audit": None, "claims": claims}


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(_doc()))
    return d


# -- the deciding number ------------------------------------------------------------------------
def test_deciding_number_is_the_first_number_of_the_last_tier_agreeing_with_the_verdict():
    by_id = {c["id"]: c for c in _doc()["claims"]}
    assert deciding_tier(by_id["T.FAIL"])["tier"] == "montecarlo"  # not exact (earlier), not trained (PASS)
    num = deciding_number(by_id["T.FAIL"])
    assert (num["tier"], num["name"], num["value"], num["stderr"], num["n"]) == ("montecarlo", "E[gap]", 0.25, 0.01,
                                                                                 1000)
    assert deciding_number(by_id["T.EVIL_1"])["name"] == "examples"
    assert deciding_number(by_id["T.NOTRUN"]) is None and deciding_number(by_id["T.ERR"]) is None
    assert deciding_tier(by_id["T.NONUM"])["tier"] == "exact" and deciding_number(by_id["T.NONUM"]) is None


# -- LaTeX ---------------------------------------------------------------------------------------
def test_latex_escape_covers_every_special_and_writes_ascii():
    assert latex_escape(SPECIALS) == (r"\textbackslash{} \& \% \$ \# \_ \{ \} \textasciitilde{} "
                                      r"\textasciicircum{}")
    assert latex_escape("± ≈ →") == r"\ensuremath{\pm} \ensuremath{\approx} \ensuremath{\to}"
    assert latex_escape("αβ") == r"\ensuremath{\alpha}\ensuremath{\beta}"  # never "$$"
    assert latex_escape("é—x…") == r"\'{e}---x\ldots{}"
    assert latex_escape("--plugin") == "-{}-plugin"
    assert latex_escape("a<b>c|d") == r"a\textless{}b\textgreater{}c\textbar{}d"
    assert latex_escape("\x1b[1m") == r"\textbackslash{}x1b{[}1m"
    assert latex_escape("∯") == "[U+222F]"
    assert latex_escape(EVIL_TITLE).isascii()
    assert [note_marker(k) for k in (0, 1, 25, 26, 27)] == ["a", "b", "z", "aa", "ab"]


def _unescaped(line: str, ch: str) -> int:
    """Occurrences of ``ch`` in ``line`` not written as ``\\ch`` (a ``\\\\`` is a pair, not an escape)."""
    return len(re.findall(r"(?<!\\)(?:\\\\)*" + re.escape(ch), line.replace("\\\\", "  ")))


def _columns(spec: str) -> int:
    spec = re.sub(r"@\{[^}]*\}", "", spec)
    spec = re.sub(r"[pmb]\{[^}]*\}", "p", spec)
    return sum(1 for c in spec if c in "lcrp")


def _check_well_formed(tex: str) -> list[str]:
    """The structural parse: braces and $ balanced, begin/end pairs nested, the tabular's rows and rules."""
    plain = re.sub(r"\\[\\&%$#_{}]", "  ", tex)  # drop the escaped characters (and the row ends \\)
    plain = "\n".join(line.split("%", 1)[0] for line in plain.split("\n"))  # comments
    depth = 0
    for ch in plain:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, "a } closes nothing"
    assert depth == 0, "unbalanced braces"
    stack = []
    for kind, env in re.findall(r"\\(begin|end)\{([^}]*)\}", plain):
        if kind == "begin":
            stack.append(env)
        else:
            assert stack and stack.pop() == env, f"\\end{{{env}}} does not close the open environment"
    assert not stack, f"environments left open: {stack}"
    for line in plain.split("\n"):
        assert line.count("$") % 2 == 0, f"unbalanced math in {line!r}"

    m = re.search(r"\\begin\{tabular\}\{((?:[^{}]|\{[^{}]*\})*)\}\n(.*?)\\end\{tabular\}", tex, re.S)
    assert m, "no tabular"
    cols, body = _columns(m.group(1)), m.group(2)
    lines = [line for line in body.split("\n") if line.strip()]
    assert [line for line in lines if line.startswith("\\") and "rule" in line] == [r"\toprule", r"\midrule",
                                                                                  r"\bottomrule"]
    assert lines[0] == r"\toprule" and lines[2] == r"\midrule" and lines[-1] == r"\bottomrule"
    rows = [line for line in lines if "rule" not in line or "&" in line]
    for row in rows:
        assert row.endswith(r" \\"), f"row without its end: {row!r}"
        assert _unescaped(row[:-3], "&") == cols - 1, f"{cols} columns expected in {row!r}"
        assert "\\\\" not in row[:-3], f"a second row end inside {row!r}"
    return rows


def test_latex_table_is_well_formed_and_escaped():
    doc = _doc()
    tex = latex_table(doc)
    assert tex.isascii()
    rows = _check_well_formed(tex)
    assert len(rows) == 1 + len(doc["claims"])  # header + one per claim
    assert rows[0].startswith("Claim & Statement & Verdict & Deciding number")
    evil = next(r for r in rows if r.startswith(r"T.EVIL\_1 &"))
    assert latex_escape(EVIL_TITLE) in evil
    assert r"\textbackslash{} \& \% \$ \# \_ \{ \} \textasciitilde{} \textasciicircum{}" in evil
    assert r"PASS\textsuperscript{a,b}" in evil  # the FAIL and the INCONCLUSIVE finding, not the PASS one
    assert r"examples: $150$" in evil
    fail = next(r for r in rows if r.startswith("T.FAIL &"))
    assert r"E{[}gap{]}: $0.25 \pm 0.01$ & 1000 \\" in fail
    assert r"$\infty \pm 0.5$ & 20" in next(r for r in rows if r.startswith("T.INF &"))
    assert r"NOT\_RUN & --- & --- \\" in next(r for r in rows if r.startswith("T.NOTRUN &"))
    assert (r"\parbox[t]{7.5em}{\raggedright ASSUMPTION\_\allowbreak UNMET} & --- & --- \\"  # two lines
            in next(r for r in rows if r.startswith("T.NONUM &")))
    notes = re.findall(r"^\\textsuperscript\{([a-z]+)\}.*\\par$", tex, re.M)
    assert notes == ["a", "b"]
    assert r"fails on 15.7\% of \textbackslash{} \& \% \$ \# \_" in tex
    assert r"stricter: I(x;y) \textless{} b --- INCONCLUSIVE: undecided at n = 10\textasciicircum{}4" in tex
    assert r"\texttt{quick-seed0-abc\_1}" in tex and r"\footnote{" not in tex
    assert "threeparttable" not in tex


def test_latex_numbers_in_scientific_form_become_math():
    tex = latex_table({"claims": [_claim("T.X", "PASS", [_tier("exact", "PASS", [_num("tiny", 1.5e-07, 2e-09, 5)])])],
                       "run_id": "r", "config": {}})
    assert r"$1.5 \times 10^{-7} \pm 2 \times 10^{-9}$ & 5 \\" in tex
    _check_well_formed(tex)


def test_standalone_latex_is_a_whole_document():
    tex = latex_table(_doc(), standalone=True)
    assert tex.startswith("\\documentclass{article}\n") and "\\usepackage{booktabs}" in tex
    assert tex.rstrip().endswith("\\end{document}") and latex_table(_doc()) in tex
    _check_well_formed(tex)


def _have_latex() -> bool:
    if not shutil.which("pdflatex") or not shutil.which("kpsewhich"):
        return False
    return bool(subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True).stdout.strip())


@pytest.mark.skipif(not _have_latex(), reason="no pdflatex with booktabs installed (the structural parse stands in)")
def test_standalone_latex_compiles_with_pdflatex(tmp_path):
    (tmp_path / "t.tex").write_text(latex_table(_doc(), standalone=True))
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]
    assert (tmp_path / "t.pdf").stat().st_size > 0


# -- the command line --------------------------------------------------------------------------
def test_show_default_is_the_text_summary(run_dir, capsys):
    assert main(["show", str(run_dir)]) == 0
    default = capsys.readouterr().out
    assert main(["show", str(run_dir), "--format", "text"]) == 0
    assert capsys.readouterr().out == default
    assert summary_table(_doc()["claims"]) in default
    assert default.startswith("quick-seed0-abc_1: profile=quick seed=0 device=cpu")


def test_show_json_parses_with_each_claims_deciding_number(run_dir, capsys):
    assert main(["show", str(run_dir), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == json.loads(json.dumps(claims_summary(_doc())))
    assert out["run_id"] == "quick-seed0-abc_1" and out["profile"] == "quick"
    assert [c["id"] for c in out["claims"]] == [c["id"] for c in _doc()["claims"]]
    by_id = {c["id"]: c for c in out["claims"]}
    assert by_id["T.EVIL_1"]["title"] == EVIL_TITLE
    assert by_id["T.EVIL_1"]["headline"].startswith("PASS (finding:")
    assert by_id["T.FAIL"]["deciding"] == {"tier": "montecarlo", "name": "E[gap]", "value": 0.25, "stderr": 0.01,
                                           "n": 1000, "kind": "montecarlo", "text": "E[gap] = 0.25 ± 0.01 (n=1000)"}
    assert by_id["T.INF"]["deciding"]["value"] == "inf"
    assert by_id["T.NOTRUN"]["deciding"] is None and by_id["T.ERR"]["deciding"] is None


def test_show_md_has_one_row_per_claim(run_dir, capsys):
    assert main(["show", str(run_dir), "--format", "md"]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table[0] == "| claim | title | verdict | tiers | source |" and table[1] == "|---|---|---|---|---|"
    rows = table[2:]
    assert [r.split(" | ")[0][2:] for r in rows] == [c["id"] for c in _doc()["claims"]]  # no links into report.md
    assert all(r.count(" | ") == 4 for r in rows)  # a | in a title is escaped
    assert "**PASS (finding: the exact identity fails on 15.7% of prompts)**" in rows[0]
    assert "Verdicts: PASS 1, FAIL 1" in out


def test_report_md_keeps_its_linked_table():
    doc = _doc()
    md = render_markdown(doc)
    assert summary_table_markdown(doc["claims"]) in md
    assert "| [T.FAIL](#tfail) | A claim | **FAIL** | exact FAIL, montecarlo FAIL, trained PASS | T §1 |" in md


def test_show_latex_on_the_command_line(run_dir, capsys):
    assert main(["show", str(run_dir), "--format", "latex"]) == 0
    assert capsys.readouterr().out == latex_table(_doc()) + "\n"
    assert main(["show", str(run_dir), "--format", "latex", "--standalone"]) == 0
    assert capsys.readouterr().out.startswith("\\documentclass{article}")


def test_standalone_without_latex_is_a_usage_error(run_dir, capsys):
    assert main(["show", str(run_dir), "--format", "md", "--standalone"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "icl-verify: error: --standalone goes with --format latex"


def test_show_latex_of_a_missing_run_is_a_usage_error(tmp_path, capsys):
    assert main(["show", str(tmp_path / "nope"), "--format", "latex"]) == 2
    err = capsys.readouterr().err
    assert "is not a folder" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unknown_format_is_a_usage_error(run_dir, capsys):
    with pytest.raises(SystemExit) as e:
        main(["show", str(run_dir), "--format", "csv"])
    assert e.value.code == 2
    assert "invalid choice: 'csv'" in capsys.readouterr().err


def test_a_tier_of_search_counts_only_is_decided_by_its_first_number():
    """Module docstring: when every number of the deciding tier is a search count, its first one is the deciding
    number."""
    claim = _claim("T.P", "PASS", [_tier("property", "PASS", [_num("examples", 150, kind="property"),
                                                              _num("shrinks", 3, kind="property")])])
    assert deciding_number(claim)["name"] == "examples"


def test_a_not_run_tier_never_decides():
    claim = _claim("T.NR", "NOT_RUN", [_tier("trained", "NOT_RUN", [_num("loss", 0.1, 0.02, 64)])])
    assert deciding_tier(claim) is None and deciding_number(claim) is None
    assert claims_summary({"claims": [claim]})["claims"][0]["deciding"] is None
